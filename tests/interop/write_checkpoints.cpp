// Writes the checkpoints that tests/interop/check_dcpp_checkpoints.py loads with Python's
// torch.distributed.checkpoint (see docs/interop.md). Values follow formulas the script recomputes.
//
//   dcpp_interop_writer OUT_DIR [--zstd]   writes OUT_DIR/all_types (with --zstd, every item
//                                          zstd-compressed: DCP's stream.zstd/1, PyTorch 2.14)

#include <dcpp/dcpp.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <string>

namespace {

// arange(35) shaped (7, 5) in `dtype`; complex types get imaginary part -arange; bool is "even".
at::Tensor pattern(at::ScalarType dtype) {
  const at::Tensor base = at::arange(35, at::kDouble).reshape({7, 5});
  if (dtype == at::kBool) {
    return base.remainder(2).eq(0);
  }
  if (at::isComplexType(dtype)) {
    return at::complex(base, -base).to(dtype);
  }
  return base.to(dtype);
}

}  // namespace

int main(int argc, char** argv) {
  const bool zstd = argc == 3 && std::string(argv[2]) == "--zstd";
  if (argc != 2 && !zstd) {
    std::fprintf(stderr, "usage: %s OUT_DIR [--zstd]\n", argv[0]);
    return 2;
  }
  dcpp::StateDict tensors;
  for (at::ScalarType dtype :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kComplexHalf, at::kComplexFloat,
        at::kComplexDouble, at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kBool}) {
    tensors.insert(dcpp::dtype_name(dtype), pattern(dtype));
  }
  dcpp::StateDict shapes;
  shapes.insert("noncontig", at::arange(12, at::kFloat).reshape({3, 4}).t());
  shapes.insert("empty", at::zeros({0, 3}));
  shapes.insert("scalar", at::scalar_tensor(3.5));
  shapes.insert("column_view", at::arange(20, at::kFloat).reshape({4, 5}).narrow(1, 1, 2));

  dcpp::StateDict inner;
  inner.insert("w", at::ones({2, 2}) * 3);
  inner.insert("tag", "deep");
  dcpp::StateDict nested;
  nested.insert("deep", inner);

  dcpp::StateDict state;
  state.insert("tensors", tensors);
  state.insert("shapes", shapes);
  state.insert("nested", nested);
  state.insert("list_of_tensors", dcpp::StateList{at::zeros({2}), at::ones({3})});
  state.insert("groups", dcpp::StateList{inner});
  state.insert("step", 7);
  state.insert("lr", 0.1);
  state.insert("name", "abc");
  state.insert("flag", true);
  state.insert("nothing", c10::IValue());
  state.insert("betas", c10::IValue(std::make_tuple(0.9, 0.999)));
  state.insert("history", dcpp::StateList{1, 2, 3});
  state.insert("layer.0.weight", at::full({2}, 5.0));  // a dotted key at the top level

  const std::string out = std::string(argv[1]) + "/all_types";
  dcpp::SaveOptions options;
  if (zstd) options.file_system.with_compression(dcpp::Compression::kZstd);
  dcpp::save(state, out, options);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
