// The registries of location drivers (by scheme) and checkpoint layouts, with the built-in ones
// registered before the first lookup, so no static initialisation order matters.

#include "dcp_layout.h"
#include "filesystem/directory_driver.h"
#include "huggingface/huggingface_checkpoint_layout.h"
#include "megatron/megatron_checkpoint_layout.h"
#include "s3/driver/s3_location_driver.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/location_driver.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace dcpp {

namespace {

struct Registry {
  std::shared_mutex mutex;
  std::map<std::string, std::shared_ptr<const LocationDriver>> drivers;
  std::vector<std::shared_ptr<const CheckpointLayout>> layouts;  // newest first

  // The drivers as the map holds them: emplace() given a shared_ptr of the internal type is a
  // template instantiated with it, which GCC exports from the shared library.
  Registry() {
    drivers.emplace(
        "file", std::shared_ptr<const LocationDriver>(std::make_shared<detail::DirectoryDriver>()));
    drivers.emplace(
        "s3", std::shared_ptr<const LocationDriver>(std::make_shared<detail::S3LocationDriver>()));
    layouts.push_back(std::make_shared<detail::MegatronCheckpointLayout>());
    layouts.push_back(std::make_shared<detail::HuggingFaceCheckpointLayout>());
    layouts.push_back(std::make_shared<detail::DcpLayout>());
  }
};

Registry& registry() {
  static Registry instance;
  return instance;
}

bool is_scheme(const std::string& scheme) {
  if (scheme.empty() || !(scheme[0] >= 'a' && scheme[0] <= 'z')) return false;
  return std::all_of(scheme.begin(), scheme.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
  });
}

// The location's files, opened by its driver on first use: asking the layouts costs nothing until
// one lists or reads (an S3 client resolves its credentials when made, which must not happen on
// one rank alone outside the load's collectives).
class LazyLocationFiles final : public LocationFiles {
 public:
  explicit LazyLocationFiles(const Location& location) : location_(location) {}
  std::string describe(const std::string& name) const override { return files().describe(name); }
  std::unique_ptr<LocationFile> open(const std::string& name) override {
    return files().open(name);
  }
  std::vector<std::string> list() override { return files().list(); }
  std::optional<std::string> read(const std::string& name) override { return files().read(name); }

 private:
  LocationFiles& files() const {
    if (!files_) files_ = location_driver(location_)->open_files(location_);
    return *files_;
  }
  const Location& location_;
  mutable std::unique_ptr<LocationFiles> files_;
};

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

void register_location_driver(const std::string& scheme,
                              std::shared_ptr<const LocationDriver> driver) {
  if (!is_scheme(scheme) || !driver) {
    throw CheckpointError(ErrorKind::kUsage,
                          "register_location_driver: '" + scheme +
                              "' needs a driver and a scheme of a-z, 0-9, '+', '-', '.' that "
                              "starts with a letter");
  }
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.drivers[scheme] = std::move(driver);
}

std::shared_ptr<const LocationDriver> location_driver(const Location& location) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto found = r.drivers.find(location.scheme());
  if (found != r.drivers.end()) return found->second;
  std::vector<std::string> schemes;
  for (const auto& [scheme, driver] : r.drivers) schemes.push_back(scheme);
  throw CheckpointError(ErrorKind::kUsage,
                        "'" + location.url() + "': no storage driver for the scheme '" +
                            location.scheme() + "://' (there are drivers for " + joined(schemes) +
                            "); register one with register_location_driver");
}

void register_checkpoint_layout(std::shared_ptr<const CheckpointLayout> layout) {
  if (!layout || layout->name().empty()) {
    throw CheckpointError(ErrorKind::kUsage, "register_checkpoint_layout: needs a named layout");
  }
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  const std::string name = layout->name();
  r.layouts.erase(std::remove_if(r.layouts.begin(), r.layouts.end(),
                                 [&](const auto& other) { return other->name() == name; }),
                  r.layouts.end());
  r.layouts.insert(r.layouts.begin(), std::move(layout));
}

std::vector<std::string> checkpoint_layout_names() {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& layout : r.layouts) names.push_back(layout->name());
  return names;
}

std::unique_ptr<StorageWriter> CheckpointLayout::make_writer(const Location& location,
                                                             std::unique_ptr<StorageWriter>) const {
  throw CheckpointError(ErrorKind::kUsage, "'" + location.url() + "': dcpp reads the layout '" +
                                               name() + "' but does not write it");
}

std::shared_ptr<const CheckpointLayout> checkpoint_layout(const Location& location) {
  std::vector<std::shared_ptr<const CheckpointLayout>> layouts;
  {
    Registry& r = registry();
    std::shared_lock lock(r.mutex);
    layouts = r.layouts;  // recognizes() may take a while (a listing); not under the lock
  }
  std::shared_ptr<const CheckpointLayout> dcp;
  for (const auto& layout : layouts) {
    if (layout->name() == location.layout()) return layout;
    if (layout->name() == kDcpLayout) dcp = layout;
  }
  if (!location.layout().empty()) {
    throw CheckpointError(ErrorKind::kUsage, "'" + location.url() +
                                                 "': no checkpoint layout is named '" +
                                                 location.layout() + "' (there are " +
                                                 joined(checkpoint_layout_names()) + ")");
  }
  LazyLocationFiles files(location);
  for (const auto& layout : layouts) {
    if (layout != dcp && layout->recognizes(location, files)) return layout;
  }
  return dcp;
}

}  // namespace dcpp
