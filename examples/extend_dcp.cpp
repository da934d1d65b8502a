// Subclassing DCP's planners and storage as in Python (docs/checkpointing.md, "Plugging in"):
//
//   extend_dcp DIR   saves a model whose layers are named "encoder.*" through a writer that
//                    reports what it wrote, then loads that checkpoint into a model whose same
//                    layers are named "backbone.*" through a planner that renames the keys, and
//                    checks that every parameter arrived bit for bit. Exits 1 if one did not.

#include <dcpp/dcpp.h>
#include <dcpp/extend.h>

#include <torch/torch.h>

#include <cstdio>
#include <string>

namespace {

struct Net : torch::nn::Module {
  explicit Net(const std::string& name) {
    layers =
        register_module(name, torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                                                    torch::nn::Linear(16, 2)));
  }
  torch::nn::Sequential layers{nullptr};
};

// A FileSystemWriter that reports each data file and its bytes once they are durable.
class ReportingWriter final : public dcpp::FileSystemWriter {
 public:
  using FileSystemWriter::FileSystemWriter;

  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner& planner) override {
    std::vector<dcpp::WriteResult> results = FileSystemWriter::write_data(plan, planner);
    int64_t bytes = 0;
    for (const dcpp::WriteResult& result : results) bytes += result.size_in_bytes;
    std::printf("wrote %zu items, %lld bytes, under %s\n", results.size(),
                static_cast<long long>(bytes), (directory() / plan.storage_data).c_str());
    return results;
  }
};

// Loads a checkpoint saved under `from` into a state dict whose keys start with `to`: set_up
// hands the default planner the same tensors under the checkpoint's names.
class RenamingLoadPlanner final : public dcpp::DefaultLoadPlanner {
 public:
  RenamingLoadPlanner(std::string from, std::string to)
      : from_(std::move(from)), to_(std::move(to)) {}

  void set_up(dcpp::StateDict& state_dict, const dcpp::Metadata& metadata,
              bool is_coordinator) override {
    renamed_ = dcpp::StateDict();
    for (const auto& item : state_dict) {
      const bool ours = item.key.rfind(to_, 0) == 0;
      renamed_.insert(ours ? from_ + item.key.substr(to_.size()) : item.key, item.value);
    }
    DefaultLoadPlanner::set_up(renamed_, metadata, is_coordinator);
  }

 private:
  std::string from_, to_;
  dcpp::StateDict renamed_;  // shares the caller's tensors; the planner loads into them in place
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path directory = argv[1];
  torch::manual_seed(0);

  Net trained("encoder");
  ReportingWriter writer(directory / "encoder",
                         dcpp::FileSystemWriterOptions().with_overwrite(true));
  dcpp::save(dcpp::get_model_state_dict(trained), writer);

  Net fresh("backbone");
  dcpp::StateDict target = dcpp::get_model_state_dict(fresh);
  dcpp::LoadOptions options;
  options.planner = std::make_shared<RenamingLoadPlanner>("encoder", "backbone");
  dcpp::load(target, directory / "encoder", options);

  const auto saved = trained.named_parameters();
  for (const auto& parameter : fresh.named_parameters()) {
    const std::string saved_name =
        "encoder" + parameter.key().substr(std::string("backbone").size());
    if (!torch::equal(parameter.value(), saved[saved_name])) {
      std::fprintf(stderr, "%s differs from the saved %s\n", parameter.key().c_str(),
                   saved_name.c_str());
      return 1;
    }
  }
  std::printf("loaded %zu parameters saved as encoder.* into backbone.*\n",
              fresh.named_parameters().size());
  return 0;
}
