#pragma once
// Lists of keys or ranks in error messages, bounded: a message names a few and counts the rest, so
// that it stays readable (and one printed by every rank of a large job stays small) whatever the
// number of items.

#include <cstddef>
#include <string>

namespace dcpp::detail {

/// How many items an error message names before it counts the rest.
inline constexpr std::size_t kItemsNamedInMessages = 10;

/// The first `limit` of `items`, each as `name(item)` gives it, joined by ", ", then
/// ", ... and N more" when `items` holds N more. `items` is any range with size() (a vector, a
/// set); "" when it is empty.
template <typename Range, typename Name>
std::string bounded_list(const Range& items, Name name, std::size_t limit = kItemsNamedInMessages) {
  std::string text;
  std::size_t named = 0;
  for (const auto& item : items) {
    if (named == limit) break;
    text += (named++ == 0 ? "" : ", ") + name(item);
  }
  if (items.size() > named) {
    text +=
        (named == 0 ? "... and " : ", ... and ") + std::to_string(items.size() - named) + " more";
  }
  return text;
}

/// bounded_list of strings, each in single quotes: "'a', 'b', ... and 3 more".
template <typename Range>
std::string quoted_list(const Range& keys, std::size_t limit = kItemsNamedInMessages) {
  return bounded_list(
      keys, [](const std::string& key) { return "'" + key + "'"; }, limit);
}

}  // namespace dcpp::detail
