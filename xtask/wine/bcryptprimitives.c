/* A stand-in bcryptprimitives.dll for running bento's Windows tests under Wine.

   Rust's std on Windows imports ProcessPrng from bcryptprimitives.dll (for HashMap's
   random keys), and Wine 8.0, the one Debian 12 ships, has no such DLL, so no Rust test
   binary even starts. This one exports ProcessPrng on top of advapi32's RtlGenRandom
   (SystemFunction036). `cargo xtask windows` builds it with mingw-w64 into target/ and
   copies it into the Wine prefix's system32 only when Wine has none of its own. It is
   never shipped. */

#include <windows.h>
#include <ntsecapi.h>

/* Fills `len` bytes at `data` with random bytes; like Windows' own, it always
   succeeds unless the system generator fails. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        /* RtlGenRandom takes a ULONG length. */
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
