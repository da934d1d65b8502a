#include "background_crc.h"

#include "format/crc32.h"

namespace dcpp::detail {

BackgroundCrc::~BackgroundCrc() { worker_.discard_pending(); }

void BackgroundCrc::add(const void* data, std::size_t size) {
  worker_.post([this, data, size] { crc_ = crc32(crc_, data, size); });
}

uint32_t BackgroundCrc::finish() {
  worker_.wait_until_idle();
  return crc_;
}

}  // namespace dcpp::detail
