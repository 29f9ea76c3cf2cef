use super::*;

fn bench(id: &str, ns: f64, elements: Option<u64>) -> Bench {
    let parts: Vec<&str> = id.split('/').collect();
    let (group, rest) = (format!("{}/{}", parts[0], parts[1]), &parts[2..]);
    Bench {
        id: id.to_owned(),
        group,
        name: rest.join("/"),
        param: rest.get(1).map(|p| (*p).to_owned()),
        ns,
        elements,
    }
}

fn data() -> Data {
    let mut d = Data::default();
    for b in [
        bench("space/mixed/bento_space", 400.0, None),
        bench("space/mixed/system_glibc", 800.0, None),
        bench("space/mixed/mimalloc", 200.0, None),
        bench("common/threads/bento_common/1", 1000.0, Some(100)),
        bench("common/threads/bento_common/2", 1000.0, Some(200)),
        bench("common/threads/mimalloc/2", 4000.0, Some(200)),
    ] {
        d.benches.insert(b.id.clone(), b);
    }
    d.files.insert(
        "session".into(),
        "| allocator | peak live | peak RSS growth (÷ live) |\n|---|---|---|\n\
         | glibc | 31.3 MiB | 51.8 MiB (1.654) |\n| common | 31.3 MiB | 35.7 MiB (1.140) |\n"
            .into(),
    );
    d.icounts = parse_icounts(
        "space-mixed-bento\tmixed steps\tbento_benches::heap::mixed_replace*\t1000\t1000\t300000\n",
    )
    .unwrap();
    d
}

#[test]
fn numbers_come_from_brackets_first() {
    assert_eq!(number("35.8 MiB (1.140)"), Some(1.140));
    assert_eq!(number("0.40 / 0.42 / 0.45"), Some(0.40));
    assert_eq!(number("1,234.5 ms"), Some(1234.5));
    assert_eq!(number("—"), None);
}

#[test]
fn cells_are_found_by_row_and_column() {
    let d = data();
    assert_eq!(
        d.cell("session", &["common"], "peak RSS growth (÷ live)"),
        Some(1.140)
    );
    assert_eq!(d.cell("session", &["glibc"], "peak live"), Some(31.3));
    assert_eq!(d.cell("session", &["talc"], "peak live"), None);
    assert_eq!(d.cell("session", &["glibc"], "no such column"), None);
    assert_eq!(d.cell("nothing", &["glibc"], "peak live"), None);
}

#[test]
fn ratios_rates_and_counts() {
    let d = data();
    assert_eq!(
        d.ratio("space/mixed/bento_space", "space/mixed/system_glibc"),
        Some(0.5)
    );
    assert_eq!(d.rate("common/threads/bento_common/2"), Some(200e6));
    assert_eq!(d.per_op("space-mixed-bento"), Some(300.0));
    assert_eq!(d.ratio("space/mixed/bento_space", "space/mixed/talc"), None);
}

#[test]
fn targets_are_judged_from_the_run() {
    let d = data();
    let find = |what: &str| TARGETS.iter().find(|t| t.what == what).unwrap();
    assert_eq!(find("mixed ÷ glibc, time").met(&d), Some(true));
    assert_eq!(find("mixed ÷ mimalloc, time").met(&d), Some(false));
    assert_eq!(find("mixed ÷ talc, time").met(&d), None);
    assert_eq!(
        find("two threads ÷ one thread, throughput").met(&d),
        Some(true)
    );
    assert_eq!(
        find("game session: peak RSS growth ÷ peak live").met(&d),
        Some(true)
    );
    assert_eq!(
        find("mixed, instructions per operation (a step is two)").met(&d),
        Some(false)
    );
    let table = targets_table(&d, "space").unwrap();
    assert!(
        table.contains("| mixed ÷ glibc, time | ≤ 0.6 | 0.50 | met |"),
        "{table}"
    );
    assert!(table.contains("| mixed ÷ mimalloc, time | ≤ 1 | 2.00 | **not met** |"));
    assert!(table.contains("| mixed ÷ talc, time | ≤ 1 | — | not measured |"));
    assert!(targets_table(&d, "nowhere").is_err());
}

#[test]
fn every_target_section_is_in_the_template() {
    let template = include_str!("../../report/template.md");
    for t in TARGETS {
        assert!(
            template.contains(&format!("{{{{targets {}}}}}", t.section)),
            "the template shows no targets of `{}`",
            t.section
        );
    }
}

#[test]
fn the_template_renders_and_draws_its_charts() {
    let dir = std::env::temp_dir().join(format!("bento-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = "# t\n{{criterion space/mixed bento_space}}\n\
                    {{criterion common/threads bento_common}}\n\
                    {{chart space space/mixed:bento_space}}\n{{icount space-mixed-bento lifo}}\n\
                    {{file session}}\n{{code demo}}\n{{targets common}}\nend\n";
    let out = render(template, &data(), &dir).unwrap();
    assert!(
        out.contains("| **bento_space** | 400.0 ns | 1.00 |"),
        "{out}"
    );
    assert!(out.contains("| system_glibc | 800.0 ns | 0.50 |"));
    assert!(
        out.contains("| mimalloc/2 | 4.00 µs | 50.0 | 0.25 |"),
        "{out}"
    );
    assert!(
        out.contains("| mixed steps | `insns space-mixed-bento 1000` |"),
        "{out}"
    );
    assert!(out.contains("| — | `insns lifo` | — | — | not counted in this run |"));
    assert!(out.contains("| common | 31.3 MiB | 35.7 MiB (1.140) |"));
    assert!(out.contains("*(`demo` was not measured in this run)*"));
    assert!(out.contains("![space: bento ÷ each peer](img/bench-space.svg)"));
    assert!(out.ends_with("end\n"));
    let svg = std::fs::read_to_string(dir.join("bench-space.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("space/mixed · system_glibc") && svg.contains("2.00"));
    assert!(render("{{nonsense}}\n", &data(), &dir).is_err());
    assert!(render("{{chart x space/mixed}}\n", &data(), &dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn icount_lines_are_checked() {
    assert!(parse_icounts("a\tb\tc\t1\t0\t5\n").is_err(), "n = 0");
    assert!(parse_icounts("a\tb\tc\t10\t5\n").is_err(), "a field short");
    assert!(parse_icounts("a\tb\tc\t1\tten\t5\n").is_err());
    let one = parse_icounts("a\tb\tc\t100\t1000\t5000\n").unwrap();
    assert_eq!((one["a"].arg, one["a"].per_op()), (100, 5.0));
    assert_eq!(parse_icounts("\n").unwrap().len(), 0);
}

#[test]
fn durations_keep_their_unit() {
    assert_eq!(duration(469.04), "469.0 ns");
    assert_eq!(duration(3350.0), "3.35 µs");
    assert_eq!(duration(199.8e6), "199.8 ms");
    assert_eq!(duration(2.5e9), "2.50 s");
}
