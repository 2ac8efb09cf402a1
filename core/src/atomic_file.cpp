// The atomic file write under the rank file and the trace beside it (atomic_file.h): a hidden
// temporary file, fsync, then link() or rename() into place, with SIGXFSZ blocked so a file-size
// limit fails the write instead of ending the program. POSIX plumbing only; the schema is
// rank_file_json.cpp's.
#include "traintime/core/atomic_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "file_errors.h"

namespace traintime::core {
namespace {

bool write_all(int fd, const std::string& data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Makes the rename/link itself durable; failure here does not undo a complete write.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A file-size limit (RLIMIT_FSIZE, as a quota may set) must fail our write with EFBIG, not end
// the program with SIGXFSZ, which the program's own writes never raised. The signal is blocked
// on this thread for the write; one our write left pending is taken back before unblocking.
class SigxfszBlocked {
 public:
  SigxfszBlocked() {
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    sigset_t pending;
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &xfsz, &old_) == 0;
  }
  ~SigxfszBlocked() {
    if (!blocked_) return;
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1) {
      sigset_t xfsz;
      sigemptyset(&xfsz);
      sigaddset(&xfsz, SIGXFSZ);
      const timespec now{0, 0};
      (void)sigtimedwait(&xfsz, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigxfszBlocked(const SigxfszBlocked&) = delete;
  SigxfszBlocked& operator=(const SigxfszBlocked&) = delete;

 private:
  sigset_t old_{};
  bool blocked_ = false;
  bool was_pending_ = false;
};

}  // namespace

bool write_text_file(const std::string& path, const std::string& text, std::string* error,
                     WriteMode mode) {
  ErrnoGuard keep_errno;
  const SigxfszBlocked no_sigxfsz;

  const std::string dir = directory_of(path);
  // Hidden, so tools globbing rank-*.json never pick up a half-written file.
  std::string tmp = dir + "/." + base_name(path) + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return set_error(error, path + ": cannot create a file in " + dir + ": " + errno_text(errno));

  const auto abandon = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return set_error(error, path + ": " + what + ": " + errno_text(err));
  };
  // mkostemp creates 0600; rank files are meant to be read by the user's other tools and peers.
  (void)::fchmod(fd, 0644);
  if (!write_all(fd, text) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return abandon("write failed", err);
  }
  if (::close(fd) != 0) return abandon("write failed", errno);

  if (mode == WriteMode::kReplace) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) return abandon("cannot rename into place", errno);
  } else {
    // link() fails with EEXIST instead of replacing, atomically, even against a racing writer.
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      if (err == EEXIST) {
        ::unlink(tmp.c_str());
        return set_error(error, path + ": already exists (not overwritten)");
      }
      return abandon("cannot move into place", err);
    }
    ::unlink(tmp.c_str());
  }
  sync_directory(dir);
  return true;
}

}  // namespace traintime::core
