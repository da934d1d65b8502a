#include <dcpp/format/metadata.h>

#include "format/pickle/torch_pickle.h"

namespace dcpp {

std::string dtype_name(at::ScalarType dtype) { return detail::python_dtype_name(dtype); }

}  // namespace dcpp
