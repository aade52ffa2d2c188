#pragma once

#include <string>
#include <string_view>

namespace pronghorn::cli {

// How a rank ended, where a scheduler finds it: `<rank dir>/exit_status`,
// one line "CODE REASON" (docs/deploy.md). srun reports only a group's
// highest code or 128+signal, not which rank was lost and which failed on
// its own; deploy/slurm's retry loop decides from these lines. A rank killed
// by a signal writes none.
// The line a rank's process left in `dir`, or "" when there is none (yet).
std::string read_exit_record(const std::string& dir);

class ExitRecord {
 public:
  // This process's end goes to `dir` from now on; a record an earlier
  // attempt left there is removed.
  void claim(const std::string& dir);
  // Writes the line if a directory was claimed; a failure is logged, never thrown.
  void record(int code, std::string_view reason) const noexcept;

 private:
  std::string path_;
};

}  // namespace pronghorn::cli
