#include "inspect/inspect_tree.h"

#include "common/progress_bar.h"
#include "storage/location_files.h"

#include <algorithm>
#include <iomanip>

namespace dcpp::tools {

namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string step_name(const json& step) {
  return step.is_string() ? step.get<std::string>() : std::to_string(step.get<int64_t>());
}

std::string describe_leaf(const json& entry) {
  if (entry["kind"] == "tensor") {
    std::string text = "tensor " + entry["dtype"].get<std::string>() + " " + entry["shape"].dump() +
                       "  " + human_bytes(entry.value("bytes", uint64_t{0}));
    if (entry.contains("stats")) text += "  stats " + entry["stats"].dump();
    return text;
  }
  return "value  " + entry["value"].dump();
}

// Ordered by first appearance, as the checkpoint lists its entries.
void insert_path(ordered& node, const json& path, std::size_t depth, const std::string& key) {
  const std::string name = step_name(path[depth]);
  if (depth + 1 == path.size()) {
    node[name] = key;
    return;
  }
  if (!node.contains(name) || !node[name].is_object()) node[name] = ordered::object();
  insert_path(node[name], path, depth + 1, key);
}

ordered build_tree(const json& entries) {
  ordered root = ordered::object();
  for (const auto& [key, entry] : entries.items()) {
    json path = entry.value("path", json::array({key}));
    if (path.empty()) path = json::array({key});
    insert_path(root, path, 0, key);
  }
  return root;
}

void print_node(const ordered& node, const json& entries, int depth, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& [name, child] : node.items()) {
    if (child.is_string()) width = std::max(width, name.size());
  }
  for (const auto& [name, child] : node.items()) {
    out << std::string(static_cast<std::size_t>(depth) * 2, ' ');
    if (child.is_string()) {
      out << std::left << std::setw(static_cast<int>(width) + 2) << name
          << describe_leaf(entries[child.get<std::string>()]) << "\n";
    } else {
      out << name << "/\n";
      print_node(child, entries, depth + 1, out);
    }
  }
}

// The counters of `node`, created at zero the first time.
json& counters(json& node, const char* count_name) {
  if (!node.is_object()) node = json{{count_name, 0}, {"bytes", uint64_t{0}}};
  return node;
}

}  // namespace

json entry_tree(const json& entries) { return json::parse(build_tree(entries).dump()); }

void add_sizes(json& inspection, const std::filesystem::path& checkpoint, const json& value_bytes) {
  json files = json::object();
  json top_level = json::object();
  for (auto& [key, entry] : inspection["entries"].items()) {
    uint64_t bytes = 0;
    if (entry["kind"] == "tensor") {
      for (const json& chunk : entry["chunks"]) {
        const std::string file = chunk["file"];
        const uint64_t length = chunk["length"];
        bytes += length;
        json& f = counters(files[file], "items");
        f["items"] = f.value("items", 0) + 1;
        f["bytes"] = f.value("bytes", uint64_t{0}) + length;
      }
    } else if (value_bytes.contains(key)) {
      bytes = value_bytes[key]["length"];
      json& f = counters(files[value_bytes[key]["file"].get<std::string>()], "items");
      f["items"] = f.value("items", 0) + 1;
      f["bytes"] = f.value("bytes", uint64_t{0}) + bytes;
    }
    entry["bytes"] = bytes;
    const json& path = entry["path"];
    const std::string top = path.empty() ? key : step_name(path[0]);
    json& t = counters(top_level[top], "entries");
    t["entries"] = t.value("entries", 0) + 1;
    t["bytes"] = t.value("bytes", uint64_t{0}) + bytes;
  }
  const std::unique_ptr<LocationFiles> location = detail::open_location_files(checkpoint.string());
  for (auto& [name, f] : files.items()) {
    std::unique_ptr<detail::RandomAccessData> file;
    try {
      file = detail::open_random_access(*location, name);
    } catch (const c10::Error&) {  // unreadable: shown as missing
    }
    f["size"] = file ? json(file->size()) : json(nullptr);
  }
  inspection["files"] = std::move(files);
  inspection["top_level"] = std::move(top_level);
}

void print_tree(const json& inspection, std::ostream& out) {
  print_node(build_tree(inspection["entries"]), inspection["entries"], 0, out);
}

void print_sizes(const json& inspection, std::ostream& out) {
  std::size_t longest = 18;
  for (const char* group : {"files", "top_level"}) {
    for (const auto& [name, sizes] : inspection[group].items()) {
      longest = std::max(longest, name.size());
    }
  }
  const int width = static_cast<int>(longest) + 2;
  out << "files:\n";
  for (const auto& [name, f] : inspection["files"].items()) {
    out << "  " << std::left << std::setw(width) << name
        << (f["size"].is_null() ? std::string("missing") : human_bytes(f["size"].get<uint64_t>()))
        << "  " << f["items"].get<int64_t>() << " items\n";
  }
  out << "top-level keys:\n";
  for (const auto& [name, t] : inspection["top_level"].items()) {
    out << "  " << std::left << std::setw(width) << name << human_bytes(t["bytes"].get<uint64_t>())
        << "  " << t["entries"].get<int64_t>() << " entries\n";
  }
}

}  // namespace dcpp::tools
