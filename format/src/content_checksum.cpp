#include "format/content_checksum.h"

#include "format/crc32.h"
#include "format/pickle/torch_pickle.h"

#include <string>
#include <vector>

namespace dcpp::detail {

namespace {

// The CRC-32 of a tensor's dtype and shape, which its bytes continue.
uint32_t header_crc32(const at::Tensor& tensor) {
  std::string header = c10::toString(tensor.scalar_type());
  for (int64_t size : tensor.sizes()) {
    header += ' ' + std::to_string(size);
  }
  return crc32(0, header.data(), header.size() + 1);  // the '\0' ends the shape
}

}  // namespace

uint32_t content_crc32(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.device().is_cpu() ? tensor : tensor.to(at::kCPU);
  const at::Tensor dense = cpu.contiguous();
  const uint32_t crc = header_crc32(dense);
  return dense.nbytes() == 0 ? crc : crc32(crc, dense.data_ptr(), dense.nbytes());
}

uint32_t content_crc32_from_bytes_crc32(const at::Tensor& contiguous, uint32_t bytes_crc32) {
  const uint32_t crc = header_crc32(contiguous);
  return contiguous.nbytes() == 0 ? crc : crc32_combine(crc, bytes_crc32, contiguous.nbytes());
}

uint32_t content_crc32(const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  const std::string pickle = encode_value_pickle(value, tensors);
  uint32_t crc = crc32(0, pickle.data(), pickle.size());
  for (const at::Tensor& tensor : tensors) {
    const uint32_t tensor_crc = content_crc32(tensor);
    crc = crc32(crc, &tensor_crc, sizeof(tensor_crc));
  }
  return crc;
}

}  // namespace dcpp::detail
