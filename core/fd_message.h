// One message on a Unix socket with at most one descriptor passed beside it
// (SCM_RIGHTS): the zygote's requests (fleet/zygote.cpp) and a Python env
// worker's spec (envs/python_worker.cpp) arrive so.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace pronghorn {

struct FdMessage {
  ssize_t bytes = 0;  // as recvmsg returns it: 0 the peer closed, < 0 errno
  int fd = -1;        // the descriptor passed (close-on-exec), or -1
  bool whole = true;  // neither the data nor the descriptor was cut short
};

// One recvmsg into data[size], blocking.
FdMessage receive_with_fd(int socket, void* data, size_t size);

}  // namespace pronghorn
