// Files a job writes whole: written to a temporary file beside the target,
// flushed to disk, then renamed over it (or linked, to create exclusively),
// so a reader sees the old file or the new one, never a part, and a full disk
// leaves the old file and no temporary behind.
// Errors throw pronghorn::Error naming the file and the system's reason.
#pragma once

#include <string>
#include <string_view>

namespace pronghorn {

enum class Replace { kYes, kNo };

// Writes `content` to `path` with `mode` (whatever the umask); true. With
// Replace::kNo it creates `path` only if nothing is there yet: false if
// something is, and nothing written.
bool write_file_atomically(const std::string& path, std::string_view content, unsigned mode = 0644,
                           Replace replace = Replace::kYes);

// The whole of a regular file; Error when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace pronghorn
