#include "dcpp_test.h"

#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/whole_value.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dcpp::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "dcpp-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory: " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path interop_output_dir(const std::string& name) {
  const char* out = std::getenv("DCPP_INTEROP_OUT");
  const std::filesystem::path dir = out != nullptr
                                        ? std::filesystem::path(out)
                                        : std::filesystem::path(DCPP_TEST_BINARY_DIR) / name;
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path fixture(const std::string& name, const std::string& version) {
  return std::filesystem::path(DCPP_TEST_FIXTURES) / ("pytorch-" + version) / name;
}

std::filesystem::path megatron_fixture(const std::string& name) {
  return std::filesystem::path(DCPP_TEST_FIXTURES) / "megatron-core" / name;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CommandResult run_command(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("cannot run " + command);
  }
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) {
    output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, output, seconds};
}

int free_loopback_port() {
  const int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  ::bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(socket_fd);
  return ntohs(address.sin_port);
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    return false;
  }
  if (a.numel() == 0) {
    return true;
  }
  at::Tensor ca = a.contiguous();
  at::Tensor cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

StateDict zeros_like(const StateDict& state) {
  StateDict zeros;
  for (const auto& item : state) {
    zeros.insert(item.key, item.value.is_tensor() ? at::zeros_like(item.value.tensor())
                                                  : c10::IValue(int64_t{0}));
  }
  return zeros;
}

CheckpointError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& error) {
    return error;
  }
  FAIL("no CheckpointError was thrown");
  throw std::logic_error("unreachable");
}

void require_equal(const StateDict& loaded, const StateDict& saved) {
  for (const auto& item : saved) {
    INFO(item.key);
    if (item.value.is_tensor()) {
      REQUIRE(bitwise_equal(loaded.at(item.key).tensor(), item.value.tensor()));
    } else {
      REQUIRE(loaded.at(item.key).value() == item.value.value());
    }
  }
}

bool same_value(const c10::IValue& a, const c10::IValue& b) {
  if (const c10::IValue* whole = dcpp::whole_value_of(a)) return same_value(*whole, b);
  if (const c10::IValue* whole = dcpp::whole_value_of(b)) return same_value(a, *whole);
  if (a.isTensor() || b.isTensor()) {
    return a.isTensor() && b.isTensor() && bitwise_equal(a.toTensor(), b.toTensor());
  }
  if (dcpp::python_object_of(a) != nullptr || dcpp::python_object_of(b) != nullptr) {
    return dcpp::identical_values(a, b);  // construction, class, arguments, state, attributes
  }
  const auto same_elements = [](c10::ArrayRef<c10::IValue> p, c10::ArrayRef<c10::IValue> q) {
    if (p.size() != q.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (!same_value(p[i], q[i])) return false;
    }
    return true;
  };
  if (a.isList() && b.isList()) return same_elements(a.toListRef(), b.toListRef());
  if (a.isTuple() && b.isTuple()) {
    return same_elements(a.toTupleRef().elements(), b.toTupleRef().elements());
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    const auto p = a.toGenericDict();
    const auto q = b.toGenericDict();
    if (p.size() != q.size()) return false;
    for (auto i = p.begin(), j = q.begin(); i != p.end(); ++i, ++j) {
      if (!(i->key() == j->key()) || !same_value(i->value(), j->value())) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace dcpp::test
