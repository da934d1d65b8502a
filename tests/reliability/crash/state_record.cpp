#include "state_record.h"

#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/stateful.h>

#include <ATen/ATen.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace crash {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "dcpp-crash-record-1\n";
constexpr char kEnd[] = "end\n";

dcpp::StateValue resolve_value(const dcpp::StateValue& value) {
  switch (value.kind()) {
    case dcpp::StateValue::Kind::kStateful:
      return resolve_stateful(value.stateful()->state_dict());
    case dcpp::StateValue::Kind::kDict:
      return resolve_stateful(value.dict());
    case dcpp::StateValue::Kind::kList: {
      dcpp::StateList out;
      for (const auto& v : value.list()) out.push_back(resolve_value(v));
      return out;
    }
    default:
      return value;
  }
}

std::string double_text(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", v);
  return text;
}

// An exact text form of a leaf value (doubles in hexadecimal, so equal texts mean equal bits
// except for NaN payloads, which no value here carries).
std::string ivalue_text(const c10::IValue& v) {
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return double_text(v.toDouble());
  if (v.isString()) return "'" + v.toStringRef() + "'";
  if (v.isTuple() || v.isList()) {
    const std::vector<c10::IValue> items =
        v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    std::string text = v.isTuple() ? "(" : "[";
    for (const auto& item : items) text += ivalue_text(item) + ",";
    return text + (v.isTuple() ? ")" : "]");
  }
  std::ostringstream out;
  out << "<" << v.tagKind() << "> " << v;
  return out.str();
}

std::string value_text(const dcpp::StateValue& value) {
  if (value.is_value()) return ivalue_text(value.value());
  if (value.is_list()) {
    std::string text = "[";
    for (const auto& item : value.list()) text += value_text(item) + ",";
    return text + "]";
  }
  throw std::runtime_error(std::string("state record: a leaf of kind ") + value.kind_name() +
                           " has no text form");
}

RecordedPiece piece_of(const at::Tensor& tensor, std::vector<int64_t> offsets) {
  return {std::move(offsets), tensor.detach().to(at::kCPU).contiguous().clone()};
}

// Binary writing and reading of the record file.
class Writer {
 public:
  void bytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  void i64(int64_t v) { bytes(&v, sizeof(v)); }
  void text(const std::string& s) {
    i64(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void ints(const std::vector<int64_t>& v) {
    i64(static_cast<int64_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  const std::string& result() const { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string data, fs::path file) : data_(std::move(data)), file_(std::move(file)) {}
  void bytes(void* out, size_t n) {
    if (n > data_.size() - at_) fail("truncated");
    std::memcpy(out, data_.data() + at_, n);
    at_ += n;
  }
  int64_t i64() {
    int64_t v;
    bytes(&v, sizeof(v));
    return v;
  }
  int64_t count(int64_t limit) {
    const int64_t n = i64();
    if (n < 0 || n > limit) fail("a count out of range");
    return n;
  }
  std::string text() {
    std::string s(static_cast<size_t>(count(static_cast<int64_t>(data_.size()))), '\0');
    bytes(s.data(), s.size());
    return s;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> v(static_cast<size_t>(count(64)));
    for (auto& x : v) x = i64();
    return v;
  }
  bool at_end() const { return at_ == data_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("state record '" + file_.string() + "' is malformed: " + what);
  }

 private:
  std::string data_;
  fs::path file_;
  size_t at_ = 0;
};

[[noreturn]] void fail_io(const std::string& what, const fs::path& path) {
  throw std::runtime_error("state record: " + what + " '" + path.string() +
                           "' failed: " + std::strerror(errno));
}

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

at::Tensor box(const at::Tensor& global, const std::vector<int64_t>& offsets,
               at::IntArrayRef sizes) {
  at::Tensor view = global;
  for (size_t d = 0; d < offsets.size(); ++d) view = view.narrow(d, offsets[d], sizes[d]);
  return view;
}

// The saved global tensor of one key, assembled from every saved rank's pieces, and which of its
// elements some rank saved.
struct Assembled {
  at::Tensor values;
  at::Tensor covered;  // bool, same shape
};

// Assembles `key` from the saved records; a replicated piece that differs from the one already
// placed is a mismatch (the saving ranks disagreed).
Assembled assemble(const std::string& key, const std::vector<const RecordedEntry*>& entries,
                   std::vector<std::string>& mismatches) {
  const RecordedEntry& first = *entries.front();
  Assembled a{at::zeros(first.global_shape, at::TensorOptions().dtype(first.dtype)),
              at::zeros(first.global_shape, at::kBool)};
  for (const RecordedEntry* entry : entries) {
    if (entry->global_shape != first.global_shape || entry->dtype != first.dtype) {
      mismatches.push_back(key + ": the saving ranks recorded different shapes or dtypes");
      continue;
    }
    for (const RecordedPiece& piece : entry->pieces) {
      at::Tensor target = box(a.values, piece.offsets, piece.tensor.sizes());
      at::Tensor covered = box(a.covered, piece.offsets, piece.tensor.sizes());
      if (covered.numel() > 0 && covered.all().item<bool>()) {
        if (!same_bytes(target, piece.tensor)) {
          mismatches.push_back(key + ": saving ranks recorded different values for the box at " +
                               shape_text(piece.offsets));
        }
      } else if (covered.any().item<bool>()) {
        mismatches.push_back(key + ": recorded pieces overlap partly at " +
                             shape_text(piece.offsets) + " (not supported by this check)");
      } else {
        target.copy_(piece.tensor);
        covered.fill_(true);
      }
    }
  }
  return a;
}

}  // namespace

dcpp::StateDict resolve_stateful(const dcpp::StateDict& state) {
  dcpp::StateDict out;
  for (const auto& item : state) out.insert(item.key, resolve_value(item.value));
  return out;
}

Record make_record(const dcpp::StateDict& resolved) {
  dcpp::StateDict copy = resolved;  // flatten_state_dict takes a mutable tree
  Record record;
  for (const dcpp::FlatEntry& flat : dcpp::flatten_state_dict(copy)) {
    const dcpp::StateValue& value = *flat.value;
    RecordedEntry entry;
    if (value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      entry.global_shape = t.sizes().vec();
      entry.dtype = t.scalar_type();
      entry.pieces.push_back(piece_of(t, std::vector<int64_t>(t.dim(), 0)));
    } else if (value.is_sharded_tensor()) {
      const dcpp::ShardedTensor& st = value.sharded_tensor();
      entry.global_shape = st.global_shape();
      entry.dtype = st.dtype();
      for (const dcpp::Shard& shard : st.local_shards()) {
        entry.pieces.push_back(piece_of(shard.tensor, shard.offsets));
      }
    } else {
      entry.is_value = true;
      entry.value_text = value_text(value);
    }
    record.emplace(flat.key, std::move(entry));
  }
  return record;
}

void write_record(const Record& record, const fs::path& file) {
  Writer w;
  w.bytes(kMagic, sizeof(kMagic) - 1);
  w.i64(static_cast<int64_t>(record.size()));
  for (const auto& [key, entry] : record) {
    w.text(key);
    w.i64(entry.is_value ? 0 : 1);
    if (entry.is_value) {
      w.text(entry.value_text);
      continue;
    }
    w.i64(static_cast<int64_t>(entry.dtype));
    w.ints(entry.global_shape);
    w.i64(static_cast<int64_t>(entry.pieces.size()));
    for (const RecordedPiece& piece : entry.pieces) {
      w.ints(piece.offsets);
      w.ints(piece.tensor.sizes().vec());
      w.i64(static_cast<int64_t>(piece.tensor.nbytes()));
      w.bytes(piece.tensor.data_ptr(), piece.tensor.nbytes());
    }
  }
  w.bytes(kEnd, sizeof(kEnd) - 1);

  const fs::path tmp = file.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("creating", tmp);
  const std::string& data = w.result();
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail_io("writing", tmp);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail_io("fsync of", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) fail_io("renaming", tmp);
  const int dir = ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) fail_io("opening the directory of", file);
  const int rc = ::fsync(dir);
  ::close(dir);
  if (rc != 0) fail_io("fsync of the directory of", file);
}

Record read_record(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw std::runtime_error("state record '" + file.string() +
                             "' is missing: every rank writes one before it saves a step");
  }
  std::stringstream data;
  data << in.rdbuf();
  Reader r(data.str(), file);
  char magic[sizeof(kMagic) - 1];
  r.bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(magic)) != 0) r.fail("not a state record");
  Record record;
  const int64_t n = r.count(int64_t{1} << 30);
  for (int64_t i = 0; i < n; ++i) {
    const std::string key = r.text();
    RecordedEntry entry;
    entry.is_value = r.i64() == 0;
    if (entry.is_value) {
      entry.value_text = r.text();
    } else {
      entry.dtype = static_cast<at::ScalarType>(r.i64());
      entry.global_shape = r.ints();
      const int64_t pieces = r.count(int64_t{1} << 20);
      for (int64_t p = 0; p < pieces; ++p) {
        RecordedPiece piece;
        piece.offsets = r.ints();
        const std::vector<int64_t> sizes = r.ints();
        piece.tensor = at::empty(sizes, at::TensorOptions().dtype(entry.dtype));
        if (r.i64() != static_cast<int64_t>(piece.tensor.nbytes())) r.fail(key + ": byte count");
        r.bytes(piece.tensor.data_ptr(), piece.tensor.nbytes());
        entry.pieces.push_back(std::move(piece));
      }
    }
    record.emplace(key, std::move(entry));
  }
  char end[sizeof(kEnd) - 1];
  r.bytes(end, sizeof(end));
  if (std::memcmp(end, kEnd, sizeof(end)) != 0 || !r.at_end()) r.fail("no end marker");
  return record;
}

Comparison compare_with_saved(const dcpp::StateDict& loaded, const std::vector<Record>& saved) {
  Comparison result;
  const Record mine = make_record(loaded);
  std::set<std::string> saved_keys;
  for (const Record& r : saved) {
    for (const auto& item : r) saved_keys.insert(item.first);
  }
  for (const std::string& key : saved_keys) {
    if (mine.count(key) == 0) result.mismatches.push_back(key + ": saved, but not loaded");
  }
  for (const auto& [key, entry] : mine) {
    std::vector<const RecordedEntry*> entries;
    for (const Record& r : saved) {
      auto it = r.find(key);
      if (it != r.end()) entries.push_back(&it->second);
    }
    if (entries.empty()) {
      result.mismatches.push_back(key + ": loaded, but no saved rank recorded it");
      continue;
    }
    result.entries += 1;
    if (entry.is_value) {
      for (const RecordedEntry* e : entries) {
        if (!e->is_value || e->value_text != entry.value_text) {
          result.mismatches.push_back(key + ": loaded " + entry.value_text + ", saved " +
                                      (e->is_value ? e->value_text : "a tensor"));
          break;
        }
      }
      continue;
    }
    bool tensors = true;
    for (const RecordedEntry* e : entries) tensors = tensors && !e->is_value;
    if (!tensors) {
      result.mismatches.push_back(key + ": loaded a tensor, saved a value");
      continue;
    }
    if (entries.front()->global_shape != entry.global_shape ||
        entries.front()->dtype != entry.dtype) {
      result.mismatches.push_back(key + ": loaded shape " + shape_text(entry.global_shape) +
                                  ", saved " + shape_text(entries.front()->global_shape) +
                                  " (or another dtype)");
      continue;
    }
    const size_t before = result.mismatches.size();
    const Assembled expected = assemble(key, entries, result.mismatches);
    if (result.mismatches.size() != before) continue;
    for (const RecordedPiece& piece : entry.pieces) {
      const at::Tensor covered = box(expected.covered, piece.offsets, piece.tensor.sizes());
      if (covered.numel() > 0 && !covered.all().item<bool>()) {
        result.mismatches.push_back(key + ": the loaded box at " + shape_text(piece.offsets) +
                                    " was not saved by any rank");
        continue;
      }
      if (!same_bytes(box(expected.values, piece.offsets, piece.tensor.sizes()), piece.tensor)) {
        const at::Tensor diff =
            box(expected.values, piece.offsets, piece.tensor.sizes()).ne(piece.tensor);
        result.mismatches.push_back(key + ": the loaded box at " + shape_text(piece.offsets) +
                                    " differs from what was saved in " +
                                    std::to_string(diff.sum().item<int64_t>()) + " of " +
                                    std::to_string(piece.tensor.numel()) + " elements");
        continue;
      }
      result.bytes += static_cast<int64_t>(piece.tensor.nbytes());
    }
  }
  return result;
}

}  // namespace crash
