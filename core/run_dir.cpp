#include "core/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"

namespace pronghorn {
namespace {

namespace fs = std::filesystem;

// What a job that never started leaves (tools/exit_record.h): a claim may take it.
constexpr const char* kExitStatus = "exit_status";

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw UsageError("run directory " + path + ": " + why);
}

// The outermost of `dir` and its parents that does not exist yet, or "".
std::string outermost_missing(fs::path dir) {
  std::string missing;
  std::error_code ec;
  for (; !dir.empty() && !fs::exists(dir, ec); dir = dir.parent_path()) {
    missing = dir.string();
    if (dir == dir.parent_path()) break;
  }
  return missing;
}

// Removes the parents of `path` up to and including `outermost`, each only
// if empty (another job may have put its own run there meanwhile).
void remove_empty_parents(const fs::path& path, const std::string& outermost) {
  if (outermost.empty()) return;
  std::error_code ec;
  for (fs::path dir = path.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (!fs::remove(dir, ec) || dir == fs::path(outermost)) return;
  }
}

}  // namespace

RunDirectory::RunDirectory(const std::string& given, Mode mode) : mode_(mode) {
  std::string path = given;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  PRONGHORN_CHECK(!path.empty(), "run directory: empty path");
  path_ = path;
  if (mode != Mode::kResume) {
    const fs::path parent = fs::path(path).parent_path();
    created_parent_ = outermost_missing(parent);
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    PRONGHORN_CHECK(!ec, "run directory ", path, ": cannot create ", parent.string(), " (",
                    ec.message(), ")");
    for (int n = 1; !created_; ++n) {
      path_ = n == 1 ? path : path + "-" + std::to_string(n);
      if (mkdir(path_.c_str(), 0700) == 0) {
        created_ = true;
      } else if (errno != EEXIST) {
        const std::string why = std::strerror(errno);
        remove_empty_parents(path_, created_parent_);  // a refusal leaves no empty runs/ behind
        refuse(path_, "cannot create it (" + why + ")");
      } else if (mode == Mode::kNew || n == 1000) {
        break;  // found: checked below
      }
    }
  }
  struct stat st {};
  if (lstat(path_.c_str(), &st) != 0) refuse(path_, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) refuse(path_, "not a directory");
  if (st.st_uid != geteuid()) {
    refuse(path_, "owned by uid " + std::to_string(st.st_uid) + ", not by this user (" +
                      std::to_string(geteuid()) + ")");
  }
  lock();
  if (mode != Mode::kResume && !created_) {
    for (const auto& entry : fs::directory_iterator(path_)) {
      const std::string name = entry.path().filename();
      if (name != "lock" && name != kExitStatus) {
        refuse(path_, "holds another run (" + entry.path().filename().string() +
                          "); continue it with --resume " + path_ +
                          ", or choose another run.name or --run-dir");
      }
    }
  }
  if (mode != Mode::kResume) chmod(path_.c_str(), 0700);  // whatever the umask or its past
}

void RunDirectory::lock() {
  const std::string file = path_ + "/lock";
  lock_fd_ = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0)
    refuse(path_, "cannot open its lock (" + std::string(std::strerror(errno)) + ")");
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = read_file(file);
    close(lock_fd_);
    lock_fd_ = -1;
    refuse(path_, "in use by another job (pid " + holder.substr(0, holder.find('\n')) + ")");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  // The pid is for people; the flock is the lock, so a failed write is harmless.
  [[maybe_unused]] const bool noted =
      ftruncate(lock_fd_, 0) == 0 && pwrite(lock_fd_, pid.data(), pid.size(), 0) > 0;
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

std::string RunDirectory::name() const { return fs::path(path_).filename().string(); }

void RunDirectory::remove_if_new() {
  if (mode_ == Mode::kResume) return;
  std::error_code ec;
  if (created_) {
    fs::remove_all(path_, ec);
    remove_empty_parents(path_, created_parent_);
    return;
  }
  for (const auto& entry : fs::directory_iterator(path_, ec)) fs::remove_all(entry.path(), ec);
}

void RunDirectory::empty_if_new() {
  if (mode_ == Mode::kResume) return;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (entry.path().filename() != "lock") fs::remove_all(entry.path(), ec);
  }
}

}  // namespace pronghorn
