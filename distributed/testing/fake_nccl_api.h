// For tests: an NcclApi with no GPU behind it, scripted to complete, stall or
// fail on cue, and recording every call. The script and the record live in a
// FakeNccl the test keeps (shared with the fake), so they outlive a
// collective whose constructor threw.
//
// Counters are atomics: a collective may be aborted from a second thread
// while its caller polls (the collective serializes the calls themselves).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/nccl_api.h"

namespace pronghorn::distributed::testing {

struct FakeNccl {
  static constexpr int kNever = -1;

  // The script.
  NcclUniqueId id_to_make{};        // what make_unique_id returns
  std::string init_error;           // init_comm fails at once with it
  int init_polls = 0;               // comm_status pending this many times after init; kNever
  int op_polls = 0;                 // stream_status pending this many times per op; kNever
  std::string launch_error;         // every launch fails at once with it
  std::string async_error;          // comm_status fails with it once an op is launched
  int async_error_after_polls = 0;  // ... after this many polls of that op
  bool finalize_stalls = false;     // finalize stays pending for ever

  // The record.
  std::optional<NcclUniqueId> id_given;  // what init_comm received
  int world_given = 0, rank_given = -1;
  std::atomic<int> inits{0}, launches{0}, comm_polls{0}, stream_polls{0};
  std::atomic<int> finalizes{0}, destroys{0}, aborts{0};
  std::atomic<int> calls_after_abort{0};  // any call on the communicator once aborted
  std::atomic<int> allocations{0}, frees{0};
  std::string last_op;  // "all_reduce_float 10", "all_reduce_int64 1", "broadcast 7 root 1"
};

class FakeNcclApi final : public NcclApi {
 public:
  explicit FakeNcclApi(std::shared_ptr<FakeNccl> fake) : fake_(std::move(fake)) {}

  NcclUniqueId make_unique_id() override { return fake_->id_to_make; }

  NcclStatus init_comm(const NcclUniqueId& id, int world, int rank, NcclCommHandle* comm) override {
    ++fake_->inits;
    fake_->id_given = id;
    fake_->world_given = world;
    fake_->rank_given = rank;
    *comm = &comm_;
    pending_comm_polls_ = fake_->init_polls;
    if (!fake_->init_error.empty()) return NcclStatus::failed(fake_->init_error);
    return NcclStatus::pending();
  }

  NcclStatus comm_status(NcclCommHandle comm) override {
    touch(comm);
    ++fake_->comm_polls;
    if (op_running_ && !fake_->async_error.empty() &&
        op_polls_seen_++ >= fake_->async_error_after_polls) {
      return NcclStatus::failed(fake_->async_error);
    }
    return count_down(pending_comm_polls_);
  }

  NcclStatus all_reduce_sum(NcclCommHandle comm, float* data, std::size_t count) override {
    return launch(comm, data != nullptr || count == 0, "all_reduce_float " + std::to_string(count));
  }
  NcclStatus all_reduce_sum(NcclCommHandle comm, int64_t* data, std::size_t count) override {
    return launch(comm, data != nullptr || count == 0, "all_reduce_int64 " + std::to_string(count));
  }
  NcclStatus broadcast(NcclCommHandle comm, std::byte* data, std::size_t bytes, int root) override {
    return launch(comm, data != nullptr || bytes == 0,
                  "broadcast " + std::to_string(bytes) + " root " + std::to_string(root));
  }

  NcclStatus stream_status() override {
    ++fake_->stream_polls;
    NcclStatus status = count_down(pending_stream_polls_);
    if (status.is_done()) op_running_ = false;
    return status;
  }

  NcclStatus finalize_comm(NcclCommHandle comm) override {
    touch(comm);
    ++fake_->finalizes;
    pending_comm_polls_ = fake_->finalize_stalls ? FakeNccl::kNever : 1;
    return NcclStatus::pending();
  }
  void destroy_comm(NcclCommHandle comm) override {
    touch(comm);
    ++fake_->destroys;
    aborted_ = true;  // gone: any later call on it is a use after free
  }
  void abort_comm(NcclCommHandle comm) override {
    touch(comm);
    ++fake_->aborts;
    aborted_ = true;
  }

  void* allocate_device(std::size_t bytes) override {
    ++fake_->allocations;
    buffers_.emplace_back(bytes);
    return buffers_.back().data();
  }
  void free_device(void*) override { ++fake_->frees; }

 private:
  void touch(NcclCommHandle comm) {
    if (aborted_ || comm != &comm_) ++fake_->calls_after_abort;
  }
  NcclStatus launch(NcclCommHandle comm, bool has_data, std::string op) {
    touch(comm);
    ++fake_->launches;
    fake_->last_op = has_data ? std::move(op) : op + " (no data)";
    if (!fake_->launch_error.empty()) return NcclStatus::failed(fake_->launch_error);
    op_running_ = true;
    op_polls_seen_ = 0;
    pending_stream_polls_ = fake_->op_polls;
    return NcclStatus::done();
  }
  // Pending while `remaining` lasts (for ever at kNever), done afterwards.
  static NcclStatus count_down(int& remaining) {
    if (remaining == FakeNccl::kNever) return NcclStatus::pending();
    if (remaining > 0) {
      --remaining;
      return NcclStatus::pending();
    }
    return NcclStatus::done();
  }

  std::shared_ptr<FakeNccl> fake_;
  int comm_ = 0;  // its address is the handle
  bool aborted_ = false;
  bool op_running_ = false;
  int op_polls_seen_ = 0;
  int pending_comm_polls_ = 0;
  int pending_stream_polls_ = 0;
  std::vector<std::vector<std::byte>> buffers_;
};

}  // namespace pronghorn::distributed::testing
