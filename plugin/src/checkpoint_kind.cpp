// CheckpointKind <-> the manifest's "kind" names. The names are on-disk format: never change one.

#include <dcpp/plugin/checkpoint_kind.h>

namespace dcpp {

const char* to_string(CheckpointKind kind) {
  switch (kind) {
    case CheckpointKind::kFull:
      return "full";
    case CheckpointKind::kExport:
      return "export";
  }
  return "full";  // unreachable: every enumerator is handled above
}

std::optional<CheckpointKind> parse_checkpoint_kind(std::string_view name) {
  for (const CheckpointKind kind : {CheckpointKind::kFull, CheckpointKind::kExport}) {
    if (name == to_string(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace dcpp
