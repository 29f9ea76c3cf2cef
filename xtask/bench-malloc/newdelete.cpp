// A C++ program heavy in new and delete of small objects: maps, lists and shared
// pointers built and torn down in rounds.
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct Node {
    int id;
    std::string name;
    std::vector<int> links;
};

int main() {
    unsigned long check = 0;
    for (int round = 0; round < 30; round++) {
        std::map<int, std::unique_ptr<Node>> nodes;
        std::list<std::shared_ptr<std::string>> names;
        for (int i = 0; i < 20000; i++) {
            auto n = std::make_unique<Node>();
            n->id = i;
            n->name = "node-" + std::to_string(i * round);
            for (int k = 0; k < i % 7; k++) n->links.push_back(k);
            names.push_back(std::make_shared<std::string>(n->name));
            nodes.emplace(i * 7919 % 20011, std::move(n));
        }
        for (auto it = nodes.begin(); it != nodes.end();) {
            check += it->second->links.size();
            it = (it->first % 3 == 0) ? nodes.erase(it) : std::next(it);
        }
        names.remove_if([](const std::shared_ptr<std::string>& s) { return s->size() % 2 == 0; });
        check += names.size() + nodes.size();
    }
    std::printf("%lu\n", check);
    return 0;
}
