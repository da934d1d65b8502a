#pragma once
// Transparent huge pages for large buffers about to be written whole.

#include <cstddef>

namespace dcpp::detail {

/// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge pages when
/// they are first touched (madvise MADV_HUGEPAGE): a fault per 2 MiB, not one per 4 KiB page.
/// Where a fault is dear (a paravirtualized VM: 11 to 16 us), filling a fresh 133 MB buffer costs
/// 0.5 s in faults alone, and a coordinator's step fills several. Only advice, and only where it
/// can matter: nothing for under 4 MiB, nothing where transparent huge pages are off, and the
/// buffer works the same either way. For memory that will be written whole (a huge page is
/// resident whole), such as a reserved output or a vector about to be filled.
void advise_huge_pages(const void* data, std::size_t bytes);

}  // namespace dcpp::detail
