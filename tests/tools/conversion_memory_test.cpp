// The CLI's conversions stream: a conversion's peak memory stays about two tensors, not the whole
// checkpoint. A file of its own: ASan's quarantine holds freed memory back, so `make test-asan
// SANITIZER_SCOPE=all` leaves this file out (Makefile, ASAN_EXCLUDE).

#include "dcpp_test.h"
#include "tools_test_util.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <string>

TEST_CASE("conversion streams: memory stays about two tensors, not the checkpoint") {
  dcpp::test::TempDir dir;
  constexpr int64_t kElements = 10 << 20;  // 40 MiB of float32 per tensor
  constexpr int kTensors = 6;              // 240 MiB in all
  {
    dcpp::StateDict state;
    for (int i = 0; i < kTensors; ++i) {
      state.insert("t" + std::to_string(i), at::full({kElements}, static_cast<float>(i)));
    }
    dcpp::save(state, dir / "ckpt");
  }
  const std::string ckpt = (dir / "ckpt").string();
  const auto [base_status, base] =
      dcpp::test::run_measuring_memory(std::string(DCPP_CLI) + " inspect " + ckpt);
  REQUIRE(base_status == 0);
  const int64_t tensor_bytes = kElements * 4;
  for (const std::string& args :
       {std::string("--to torch-save ") + ckpt + " " + (dir / "a.pt").string(),
        std::string("--to safetensors --dtype bf16 ") + ckpt + " " +
            (dir / "a.safetensors").string(),
        std::string("--to dcp ") + (dir / "a.pt").string() + " " + (dir / "b").string()}) {
    const auto [status, peak] =
        dcpp::test::run_measuring_memory(std::string(DCPP_CLI) + " convert " + args);
    INFO(args << ": peak " << peak / (1 << 20) << " MiB, inspect " << base / (1 << 20) << " MiB");
    REQUIRE(status == 0);
    REQUIRE(peak - base < 2 * tensor_bytes + tensor_bytes / 2);
  }
  const auto [diff_status, diff_peak] = dcpp::test::run_measuring_memory(
      std::string(DCPP_CLI) + " diff " + ckpt + " " + (dir / "b").string());
  REQUIRE(diff_status == 0);
  REQUIRE(diff_peak - base < 3 * tensor_bytes);
}
