// Fork/exec of the job with pass-through output, and ending it with its whole process tree.
#include "launch/job_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/file_util.h"
#include "launch/failure_messages.h"

extern char** environ;

namespace tessera::launch {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fields of /proc/<pid>/stat after the command name (which may contain spaces and parentheses).
std::vector<std::string> stat_fields(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  return f;  // f[0] = state, f[1] = ppid, ... f[11] = utime, f[12] = stime
}

void signal_all(pid_t group, const std::set<int>& pids, int sig) {
  if (group > 0) ::kill(-group, sig);
  for (int p : pids)
    if (p > 1 && p != ::getpid()) ::kill(p, sig);
}

}  // namespace

std::string wait_status_text(int status) {
  if (WIFSIGNALED(status)) return signal_description(WTERMSIG(status));
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

int wait_status_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  // A dead rank stays a zombie until its parent (mpirun) reaps it: that is dead already.
  const std::vector<std::string> f = stat_fields(pid);
  return f.empty() || f[0] != "Z";
}

std::vector<int> process_descendants(int pid) {
  std::map<int, std::vector<int>> children;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      const int p = std::atoi(e->d_name);
      if (p <= 0) continue;
      const std::vector<std::string> f = stat_fields(p);
      if (f.size() > 1) children[std::atoi(f[1].c_str())].push_back(p);
    }
    ::closedir(d);
  }
  std::vector<int> out;
  std::vector<int> todo{pid};
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    for (int c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

std::optional<int> find_process_named(int pid, const std::string& basename) {
  auto named = [&basename](int p) {
    std::ifstream in("/proc/" + std::to_string(p) + "/cmdline");
    std::string argv0;
    std::getline(in, argv0, '\0');
    const size_t slash = argv0.rfind('/');
    return (slash == std::string::npos ? argv0 : argv0.substr(slash + 1)) == basename;
  };
  if (named(pid)) return pid;
  for (int p : process_descendants(pid))
    if (named(p)) return p;
  return std::nullopt;
}

double process_cpu_seconds(int pid) {
  const std::vector<std::string> f = stat_fields(pid);
  if (f.size() < 13) return -1;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / ticks;
}

Result<JobProcess> JobProcess::start(const std::vector<std::string>& argv,
                                     const std::vector<std::pair<std::string, std::string>>& env) {
  if (argv.empty()) return invalid_argument("no job command given: write it after '--'");
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& [k, v] : env) overridden = overridden || k == name;
    if (!overridden) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0)
    return io_error(std::string("cannot create pipes for the job: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) return io_error(std::string("cannot fork the job: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvpe(args[0], args.data(), envp.data());
    const int err = errno;  // tell the parent why exec failed through the close-on-exec pipe
    (void)!::write(exec_pipe[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before the parent signals it
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  const ssize_t n = ::read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  ::close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    ::waitpid(pid, nullptr, 0);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return not_found("cannot run '" + argv[0] + "': " + std::strerror(exec_errno) +
                     " (check the command after '--' and PATH)");
  }
  return JobProcess(pid, out_pipe[0], err_pipe[0]);
}

JobProcess::JobProcess(JobProcess&& o) noexcept
    : pid_(o.pid_), fds_{o.fds_[0], o.fds_[1]}, partial_{std::move(o.partial_[0]), std::move(o.partial_[1])},
      status_(o.status_) {
  o.pid_ = -1;
  o.fds_[0] = o.fds_[1] = -1;
}

JobProcess::~JobProcess() {
  if (pid_ > 0 && running()) terminate(0, {});
  for (int& fd : fds_)
    if (fd >= 0) ::close(fd);
}

void JobProcess::reap(bool block) {
  if (pid_ <= 0 || !running()) return;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_) status_ = status;
}

void JobProcess::pump(int timeout_ms, const std::function<void(std::string_view)>& on_line) {
  pollfd pfd[2];
  int n = 0;
  int which[2];
  for (int i = 0; i < 2; ++i)
    if (fds_[i] >= 0) {
      pfd[n] = {fds_[i], POLLIN, 0};
      which[n++] = i;
    }
  if (n == 0) {
    if (timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  } else if (::poll(pfd, n, timeout_ms) > 0) {
    for (int k = 0; k < n; ++k) {
      if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int i = which[k];
      char buf[65536];
      const ssize_t got = ::read(fds_[i], buf, sizeof(buf));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        ::close(fds_[i]);
        fds_[i] = -1;
        if (!partial_[i].empty()) on_line(partial_[i]);
        partial_[i].clear();
        continue;
      }
      (void)write_fully(i == 0 ? 1 : 2, buf, static_cast<size_t>(got));
      partial_[i].append(buf, static_cast<size_t>(got));
      size_t start = 0;
      for (size_t nl; (nl = partial_[i].find('\n', start)) != std::string::npos; start = nl + 1)
        on_line(std::string_view(partial_[i]).substr(start, nl - start));
      partial_[i].erase(0, start);
    }
  }
  reap(false);
}

void JobProcess::drain(double max_s, const std::function<void(std::string_view)>& on_line) {
  const double end = now_s() + max_s;
  while ((fds_[0] >= 0 || fds_[1] >= 0) && now_s() < end) pump(50, on_line);
}

void JobProcess::signal_group(int sig) const {
  if (pid_ > 0 && running()) ::kill(-pid_, sig);
}

void JobProcess::terminate(double grace_s, const std::vector<int>& extra_pids) {
  std::set<int> pids(extra_pids.begin(), extra_pids.end());
  if (running())
    for (int p : process_descendants(pid_)) pids.insert(p);
  if (running()) pids.insert(pid_);
  signal_all(pid_, pids, SIGTERM);
  const double end = now_s() + grace_s;
  while (running() && now_s() < end) {
    reap(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Whatever is left, including ranks that outlived mpirun, gets SIGKILL.
  if (running())
    for (int p : process_descendants(pid_)) pids.insert(p);
  signal_all(pid_, pids, SIGKILL);
  reap(true);
}

}  // namespace tessera::launch
