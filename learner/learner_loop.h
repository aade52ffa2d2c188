// Learner::Loop, the learner's state and loop (learner.h): declared here for
// the two files that define it, learner.cpp (setup, the step loop, control
// requests, reports) and learner_cluster.cpp (its side of several learners).
// Internal to learner/.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "learner/batch_prefetcher.h"
#include "learner/control_board.h"
#include "learner/data_parallel.h"
#include "learner/evaluator.h"
#include "learner/job_health.h"
#include "learner/learner.h"
#include "learner/reporting.h"
#include "learner/run_stats.h"
#include "learner/run_status.h"
#include "learner/supervisor.h"
#include "learner/trainer.h"

namespace pronghorn::learner {
namespace loop_time {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
inline Clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace loop_time

using loop_time::Clock;

// One learner and its node's actors: setup, then run() until done.
class Learner::Loop {
 public:
  Loop(const TrainOptions& o, ControlBoard& board, const std::atomic<bool>& stop);
  ~Loop() { board_.close(); }  // a loop that ended on an error answers what is queued

  TrainResult run();
  // After run() threw: the run's last metrics line, saying so.
  void report_failure(const std::exception& error) noexcept;

 private:
  static std::unique_ptr<buffer::Ring> create_ring(const Config& c, const std::string& name,
                                                   const EnvSpec& spec);
  void start_actors();
  void end_remote_actors(bool job_ended);
  void scale_remote_node(const ControlRequest& r, ControlReply& reply);
  void resume();
  void share_initial_state();
  ClusterStep learn_together(std::optional<PreparedBatch>& prepared);
  Checkpoint snapshot();
  std::string checkpoint();
  void evaluate(Clock::time_point now);
  void handle(ControlBoard::Pending& pending);
  v1::Status status() const;
  void publish_status() { board_.publish(status()); }
  void learn(PreparedBatch& prepared);
  void report(Clock::time_point now);
  double elapsed() const { return loop_time::seconds(Clock::now() - start_); }
  bool training_at_target() const {  // the mean of the last 100 training episodes
    return target_ != 0 && stats_.has_full_window() && stats_.return_mean() >= target_;
  }

  const TrainOptions o_;  // a copy: the caller's may be a temporary
  const Config& c_;
  ControlBoard& board_;
  const std::atomic<bool>& stop_;
  const int64_t T_, K_, B_;
  const EnvSpec spec_;
  const int rank_;
  const std::string id_, ring_name_, slab_name_;  // shared memory of this learner
  std::unique_ptr<buffer::Ring> ring_;
  Trainer trainer_;
  std::unique_ptr<buffer::WeightSlab> slab_;
  std::optional<DataParallel> parallel_;  // with several learners
  std::vector<float> flat_;               // the model's parameters, as published
  const std::string checkpoints_;
  const std::string run_dir_absolute_ = std::filesystem::absolute(o_.run_dir).string();
  const std::string config_digest_;
  uint64_t version_ = 0;
  RunStats stats_;
  Reporter reporter_;
  const int initial_actors_;  // checked against the node's capacity before the job starts
  const Clock::time_point start_ = Clock::now();
  // Destroyed in reverse: the prefetcher, then the actors.
  std::optional<Supervisor> supervisor_;
  std::optional<BatchPrefetcher> prefetcher_;
  std::unique_ptr<RemoteActors> remote_;     // destroyed first: it writes into the ring
  std::vector<v1::RemoteNode> remote_rows_;  // as of the last report
  bool stop_requested_ = false, checkpoint_at_stop_ = true;
  double cluster_return_ = 0;                // several learners: the return that reached the target
  std::vector<v1::RankStatus> rank_rows_;    // rank 0 of several: every rank's last row
  bool enter_at_once_ = false;               // several learners: see run()
  std::vector<ControlAnswer> stop_replies_;  // answered once stopped
  Clock::time_point last_report_;
  uint64_t steps_at_report_ = 0, learner_steps_at_report_ = 0;  // set when run() starts
  uint64_t local_steps_at_report_ = 0;
  JobHealth health_;
  std::string health_line_;                     // as of the last report
  std::string state_ = "running", end_reason_;  // Status.state, .end_reason
  // run.target_return resolved ("auto": the env's own); 0 = off.
  const double target_ = c_.run.target_return.value_or(spec_.target_return);
  std::optional<Evaluator> evaluator_;  // rank 0's, from run()
  Clock::time_point next_eval_;
  bool eval_reached_target_ = false;  // an evaluation's mean and the training mean reached target_
};

}  // namespace pronghorn::learner
