#include "fleet/process_title.h"

#include <errno.h>  // program_invocation_name (GNU)

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

// POSIX: the program declares it; glibc does too, but only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::fleet {
namespace {

// The start-up strings' area: [begin, args_end) the arguments, then up to
// `end` the environment's strings where the kernel counts them as one
// (they follow the arguments directly).
struct Area {
  char* begin = nullptr;
  char* args_end = nullptr;
  char* end = nullptr;
};

Area find_area() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Field 2 (the command's name) may hold spaces and parentheses: count from its last ')'.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return {};
  std::istringstream fields(stat.substr(name_end + 1));
  // Fields 48 to 51 (proc(5)): arg_start, arg_end, env_start, env_end;
  // field 3 is the state, a letter.
  std::string state;
  fields >> state;
  unsigned long value[52] = {};
  for (int field = 4; field <= 51 && fields >> value[field]; ++field) {
  }
  const unsigned long arg_start = value[48], arg_end = value[49], env_start = value[50],
                      env_end = value[51];
  if (arg_start == 0 || arg_end <= arg_start) return {};
  // Addresses in this process, as the kernel gives them.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  const auto at = [](unsigned long address) { return reinterpret_cast<char*>(address); };
  Area area;
  area.begin = at(arg_start);
  area.args_end = at(arg_end);
  area.end = env_start == arg_end && env_end > env_start ? at(env_end) : area.args_end;
  return area;
}

// The environment's strings, copied out of the area before it is written
// over; environ points at the copies.
void move_environment() {
  static bool moved = false;  // a forked child inherits the copies (and this flag)
  if (moved) return;
  moved = true;
  size_t count = 0;
  while (environ != nullptr && environ[count] != nullptr) ++count;
  char** copies = new char*[count + 1];  // kept for the life of the process, as environ is
  for (size_t i = 0; i < count; ++i) copies[i] = strdup(environ[i]);
  copies[count] = nullptr;
  environ = copies;
}

}  // namespace

void set_process_title(const std::vector<std::string>& args) {
  static const Area area = find_area();
  if (area.begin == nullptr || args.empty()) return;
  move_environment();
  // glibc's own messages name the program through these; they point into the area.
  program_invocation_name = strdup(args[0].c_str());
  const char* slash = std::strrchr(program_invocation_name, '/');
  program_invocation_short_name = slash != nullptr ? strdup(slash + 1) : program_invocation_name;

  std::string title;
  for (const std::string& arg : args) title.append(arg).push_back('\0');
  const size_t args_size = static_cast<size_t>(area.args_end - area.begin);
  const size_t size = static_cast<size_t>(area.end - area.begin);
  if (title.size() > args_size) {
    // One line: the kernel shows the area up to its first NUL when the
    // arguments' last byte is not one (written over here: the title is longer).
    title.pop_back();
    for (char& c : title) c = c == '\0' ? ' ' : c;
    if (title.size() > size - 1) title.resize(size - 1);
    title.push_back('\0');
  }
  std::memset(area.begin, 0, size);
  std::memcpy(area.begin, title.data(), title.size());
}

}  // namespace pronghorn::fleet
