// Gloo process groups from the torchrun variables.
//
// Rendezvous, as torch.distributed's env:// init does it: rank 0 starts a c10d::TCPStore server
// on MASTER_ADDR:MASTER_PORT and every rank connects to it (rank 0 waits for all WORLD_SIZE ranks
// to arrive); each group then exchanges its Gloo addresses through the store under its own
// prefix "dcpp/<group_name>/" and connects a full mesh, then the ranks leave together (a store
// barrier whose last reader is the group's rank 0, see leave_together). Every step is bounded by
// the options' timeout, and Gloo's collectives get the same timeout, so a rank that never comes or
// dies makes the others throw instead of waiting forever.

#include <dcpp/dist/process_group.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace dcpp {
namespace {

std::string message_of(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

// The caller's store under the group's prefix, waiting up to the group's timeout in every blocking
// call (get, wait), without changing the timeout of the caller's store, which others may share.
class GroupStore final : public c10d::PrefixStore {
 public:
  GroupStore(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store,
             std::chrono::milliseconds timeout)
      : c10d::PrefixStore(prefix, std::move(store)), group_timeout_(timeout) {
    c10d::Store::setTimeout(timeout);  // this wrapper's own, reported by getTimeout()
  }

  // PrefixStore's would set the wrapped store's timeout.
  void setTimeout(const std::chrono::milliseconds& timeout) override {
    group_timeout_ = timeout;
    c10d::Store::setTimeout(timeout);
  }

  std::vector<uint8_t> get(const std::string& key) override {
    c10d::PrefixStore::wait({key}, group_timeout_);
    return c10d::PrefixStore::get(key);
  }
  void wait(const std::vector<std::string>& keys) override {
    c10d::PrefixStore::wait(keys, group_timeout_);
  }
  using c10d::PrefixStore::wait;

 private:
  std::chrono::milliseconds group_timeout_;
};

// The end of making a group, on every rank: no rank returns before every rank has its Gloo
// connections, and the group's rank 0 returns last, once every other rank has had the last answer
// it needs from the store. Rank 0 of the job hosts the TCPStore: a rank 0 that returned first and
// exited (its work done) would close the store under ranks still reading their peers' addresses
// from it ("Connection closed by peer"). Keys are counted per generation, so a group made again
// under the same name (one group at a time per name) waits for its own ranks only.
void leave_together(c10d::Store& store, int rank, int size) {
  const int64_t arrived = store.add("made", 1);
  const int64_t generation = (arrived - 1) / size;
  const std::string suffix = "/" + std::to_string(generation);
  if (arrived == (generation + 1) * size) store.set("all_made" + suffix, std::vector<uint8_t>{1});
  store.wait({"all_made" + suffix});
  // Everyone's last store call: after this add, only rank 0 needs the store again.
  const int64_t left = store.add("left" + suffix, 1);
  if (left == size) store.set("all_left" + suffix, std::vector<uint8_t>{1});
  if (rank == 0) store.wait({"all_left" + suffix});
}

std::string required_variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string("environment variable ") + name +
                              " is not set: start the ranks with dcpp-launch or torchrun, or set "
                              "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
  }
  return value;
}

int integer_variable(const char* name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end) {
    throw CheckpointError(ErrorKind::kUsage, std::string("environment variable ") + name + "=\"" +
                                                 text + "\" is not an integer");
  }
  return value;
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address == "::1" || address.rfind("127.", 0) == 0;
}

// The address of this host from which it reaches `master`: the source address the kernel routes
// a datagram to it from (connect() on a UDP socket sends nothing). Empty when there is no route.
// Binding Gloo there, rather than to the address the host name resolves to, keeps a host whose
// name resolves to a loopback address (Debian's /etc/hosts maps it to 127.0.1.1) reachable from
// the others.
std::string address_towards(const std::string& master, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return "";
  }
  std::string address;
  for (const addrinfo* entry = found; entry != nullptr && address.empty(); entry = entry->ai_next) {
    const int fd = ::socket(entry->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    char text[INET6_ADDRSTRLEN] = {};
    if (::connect(fd, entry->ai_addr, entry->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&local), length, text, sizeof(text), nullptr, 0,
                      NI_NUMERICHOST) == 0) {
      address = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return address;
}

std::string where(const LaunchEnvironment& env) {
  return env.master_addr + ":" + std::to_string(env.master_port);
}

// Gloo and the TCPStore write to sockets without MSG_NOSIGNAL, so a write to a peer that died
// raises SIGPIPE, whose default action ends this rank at once and silently instead of letting the
// collective fail with an error that names the peer. Python ignores SIGPIPE, so PyTorch's ranks
// never meet this; a C++ rank does. Ignores it when the program left it at its default; a
// program's own handler (or its choice to ignore it) stays.
void ignore_broken_pipe_signal() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
      current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

LaunchEnvironment LaunchEnvironment::from_env() {
  LaunchEnvironment env;
  env.rank = integer_variable("RANK", required_variable("RANK"));
  env.world_size = integer_variable("WORLD_SIZE", required_variable("WORLD_SIZE"));
  const char* local_rank = std::getenv("LOCAL_RANK");
  env.local_rank = (local_rank != nullptr && *local_rank != '\0')
                       ? integer_variable("LOCAL_RANK", local_rank)
                       : env.rank;
  env.master_addr = required_variable("MASTER_ADDR");
  env.master_port = integer_variable("MASTER_PORT", required_variable("MASTER_PORT"));
  env.validate();
  return env;
}

void LaunchEnvironment::validate() const {
  if (world_size < 1) {
    throw CheckpointError(ErrorKind::kUsage,
                          "WORLD_SIZE=" + std::to_string(world_size) + " must be at least 1");
  }
  if (rank < 0 || rank >= world_size) {
    throw CheckpointError(ErrorKind::kUsage,
                          "RANK=" + std::to_string(rank) +
                              " is outside [0, WORLD_SIZE=" + std::to_string(world_size) + ")");
  }
  if (local_rank < 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          "LOCAL_RANK=" + std::to_string(local_rank) + " is negative");
  }
  if (master_addr.empty()) throw CheckpointError(ErrorKind::kUsage, "MASTER_ADDR is empty");
  if (master_port < 1 || master_port > 65535) {
    throw CheckpointError(ErrorKind::kUsage,
                          "MASTER_PORT=" + std::to_string(master_port) + " is outside [1, 65535]");
  }
}

c10::intrusive_ptr<c10d::Store> make_tcp_store(const LaunchEnvironment& env,
                                               const ProcessGroupOptions& options) {
  ignore_broken_pipe_signal();
  env.validate();
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(env.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = options.timeout;
  compat::apply_libuv_choice(store_options, std::getenv("USE_LIBUV"));
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& error) {
    const std::string what =
        env.rank == 0 ? "could not start the store at " + where(env) + " or not all " +
                            std::to_string(env.world_size) + " ranks connected to it within " +
                            std::to_string(options.timeout.count()) + " ms"
                      : "could not connect to the store of rank 0 at " + where(env) + " within " +
                            std::to_string(options.timeout.count()) + " ms";
    throw CheckpointError(ErrorKind::kRankFailed,
                          "rank " + std::to_string(env.rank) + ": " + what + ": " +
                              message_of(error) +
                              " (check that every rank runs with the same MASTER_ADDR and "
                              "MASTER_PORT and that the port is free on rank 0)");
  }
}

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const ProcessGroupOptions& options) {
  ignore_broken_pipe_signal();
  if (!store)
    throw CheckpointError(ErrorKind::kUsage, "make_gloo_process_group: the store is null");
  if (size < 1 || rank < 0 || rank >= size) {
    throw CheckpointError(ErrorKind::kUsage, "make_gloo_process_group: rank " +
                                                 std::to_string(rank) + " is outside [0, " +
                                                 std::to_string(size) + ")");
  }
  if (options.group_name.empty()) {
    throw CheckpointError(ErrorKind::kUsage, "make_gloo_process_group: the group name is empty");
  }
  if (options.timeout.count() <= 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          "make_gloo_process_group: the timeout must be positive");
  }
  try {
    auto prefixed =
        c10::make_intrusive<GroupStore>("dcpp/" + options.group_name, store, options.timeout);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->threads = options.threads > 0 ? options.threads : 2;
    gloo_options->devices.push_back(
        options.gloo_hostname.empty()
            ? c10d::ProcessGroupGloo::createDefaultDevice()
            : c10d::ProcessGroupGloo::createDeviceForHostname(options.gloo_hostname));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, gloo_options);
    leave_together(*prefixed, rank, size);
    return compat::gloo_as_process_group<c10d::ProcessGroup>(
        c10::intrusive_ptr<c10d::Store>(prefixed), rank, size, options.timeout, gloo);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    throw CheckpointError(ErrorKind::kRankFailed,
                          "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                              ": could not make the Gloo process group \"" + options.group_name +
                              "\" within " + std::to_string(options.timeout.count()) + " ms: " +
                              message_of(error) + " (did every rank start and make this group?)");
  }
}

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group(const LaunchEnvironment& env,
                                                               const ProcessGroupOptions& options) {
  const auto store = make_tcp_store(env, options);
  ProcessGroupOptions group_options = options;
  if (group_options.gloo_hostname.empty()) group_options.gloo_hostname = gloo_hostname_for(env);
  return make_gloo_process_group(store, env.rank, env.world_size, group_options);
}

std::string gloo_hostname_for(const LaunchEnvironment& env) {
  return is_loopback(env.master_addr) ? "127.0.0.1"
                                      : address_towards(env.master_addr, env.master_port);
}

c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group_from_env(
    const ProcessGroupOptions& options) {
  return make_gloo_process_group(LaunchEnvironment::from_env(), options);
}

}  // namespace dcpp
