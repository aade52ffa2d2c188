// A job's run directory (docs/training.md "The run directory"), held for the job's life: it is
// created mode 0700, must belong to this process's user, and is locked
// exclusively (flock on `<dir>/lock`, which names the holder's pid), so two
// jobs never write one directory at once and a reused name never mixes two
// runs' metrics and checkpoints.
// Threads: one owner.
#pragma once

#include <string>

namespace pronghorn {

class RunDirectory {
 public:
  enum class Mode {
    kNew,            // `path` must not exist, or be an empty directory of this user
                     // (empty but for the exit_status of a job that never started)
    kNewOrSuffixed,  // as kNew, but a taken `path` gives way to `path-2`, `path-3`, …
    kResume,         // `path` must exist and belong to this user
  };
  // Claims and locks the directory; throws UsageError naming it when it is
  // refused (another run's, another user's, or in use by a live job).
  RunDirectory(const std::string& given, Mode mode);
  ~RunDirectory();  // unlocks
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string name() const;  // its last component

  // For a job that failed to start: removes what it wrote, and the directory
  // (with the parents it made) if this created it. Never touches a directory
  // opened with kResume.
  void remove_if_new();
  // For a job that failed to start but whose end a scheduler reads there
  // (exit_status: a rank that never came): removes what it wrote and keeps
  // the directory. A kNew claim takes such a directory again.
  void empty_if_new();

 private:
  void lock();

  std::string path_;
  Mode mode_;
  bool created_ = false;        // by this object, not found
  std::string created_parent_;  // the outermost parent this object made, or ""
  int lock_fd_ = -1;
};

}  // namespace pronghorn
