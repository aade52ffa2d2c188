// Jobs that share a machine (docs/training.md "Jobs on one machine"): a job never
// shares, steals or deletes another job's port, run directory or token, and
// its owner can always reach its control plane. Real processes, real sockets,
// a second user through setpriv, a small tmpfs for a full disk.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "proto/pronghorn.grpc.pb.h"
#include "tests/testing/control_job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn;
using namespace pronghorn::testing;
using grpc::StatusCode;
namespace fs = std::filesystem;

const std::string kBin = PRONGHORN_BIN;

// A port nothing listens on now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  (void)bind(fd, reinterpret_cast<sockaddr*>(&a), size);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  close(fd);
  return ntohs(a.sin_port);
}

int threads_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

std::string test_dir(const std::string& name) {
  std::string dir =
      ::testing::TempDir() + "/shared-machine-test-" + std::to_string(getpid()) + "-" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(SharedMachineTest, ASecondJobOnTheSamePortFailsAtStartAndLeavesNoRunDirectory) {
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  Job first({"--set", "server.address=" + address});
  auto stub = first.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  EXPECT_EQ(first.address, address);

  const std::string dir = test_dir("second");
  auto [code, out] = shell(kBin + " train --run-dir " + dir + " --set server.address=" + address +
                           " --set server.metrics_port=0 --set actor.count=1");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("cannot listen there (another job on that port?"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir)) << "the run directory of a job that never started is removed";
  // Every connection still reaches the first job.
  for (int i = 0; i < 20; ++i) {
    auto fresh =
        v1::Learner::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    ASSERT_EQ(get_status(*fresh).run_name(), first.name);
  }
}

TEST(SharedMachineTest, OpenStatusStreamsPinNoThreadAndTheOwnersCallsGetThrough) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  const int threads_before = threads_of(job.pid);

  // 64 unauthenticated streams that ask for an hour between messages.
  // Opens all or, where one is refused, cancels those it opened and says so.
  constexpr int kStreams = 64;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::Status>>> readers;
  auto cancel_streams = [&] {
    for (auto& c : contexts) c->TryCancel();
    for (auto& r : readers) EXPECT_EQ(r->Finish().error_code(), StatusCode::CANCELLED);
    contexts.clear();
    readers.clear();
  };
  auto open_streams = [&] {
    v1::WatchStatusRequest watch;
    watch.set_interval_s(3600);
    for (int i = 0; i < kStreams; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(std::chrono::system_clock::now() + 60s);
      readers.push_back(stub->WatchStatus(contexts.back().get(), watch));
      v1::Status first;
      if (!readers.back()->Read(&first)) {
        EXPECT_EQ(readers.back()->Finish().error_code(), StatusCode::RESOURCE_EXHAUSTED);
        readers.pop_back();
        contexts.pop_back();
        cancel_streams();
        return false;
      }
      EXPECT_EQ(first.run_name(), job.name);
    }
    return true;
  };
  ASSERT_TRUE(open_streams());
  EXPECT_LT(threads_of(job.pid), threads_before + 8) << "streams hold no thread each";

  // One more is refused, apart from unary calls.
  {
    v1::WatchStatusRequest watch;
    auto c = context();
    auto reader = stub->WatchStatus(c.get(), watch);
    v1::Status s;
    EXPECT_FALSE(reader->Read(&s));
    EXPECT_EQ(reader->Finish().error_code(), StatusCode::RESOURCE_EXHAUSTED);
  }
  // The owner's calls get through at once.
  const auto start = std::chrono::steady_clock::now();
  v1::SaveCheckpointReply saved;
  grpc::Status rpc = stub->SaveCheckpoint(context(job.token).get(), {}, &saved);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_TRUE(fs::exists(saved.path()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  // Cancelled streams are gone within moments (the server learns of each
  // cancellation on its own): as many can be opened again.
  cancel_streams();
  ASSERT_TRUE(wait_for(open_streams, 5s));

  // Stop reaches the job, and every stream ends with a last status saying so.
  v1::StopRequest stop;
  stop.set_graceful(false);
  v1::StopReply stopped;
  rpc = stub->Stop(context(job.token).get(), stop, &stopped);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  for (auto& r : readers) {
    v1::Status last;
    EXPECT_TRUE(r->Read(&last));
    EXPECT_TRUE(last.stopping());
    EXPECT_TRUE(r->Finish().ok());
  }
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
}

// A server at another address that says it is the job in some run directory
// and records what it was sent.
class Impostor final : public v1::Learner::Service {
 public:
  explicit Impostor(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest*,
                         v1::Status* reply) override {
    note(*context);
    reply->set_run_dir(run_dir_);
    return grpc::Status::OK;
  }
  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest*, v1::StopReply*) override {
    note(*context);
    return {StatusCode::UNAUTHENTICATED, "impostor"};
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  void note(grpc::ServerContext& context) {
    std::lock_guard lock(mutex_);
    for (const auto& [key, value] : context.client_metadata()) {
      if (key == "authorization") seen_.emplace_back(value.data(), value.size());
    }
  }
  const std::string run_dir_;
  std::mutex mutex_;
  std::vector<std::string> seen_;
};

TEST(SharedMachineTest, TheCliSendsARunDirectorysTokenOnlyToTheAddressItRecords) {
  // A job's run directory: its token and the address it listens on.
  const std::string dir = test_dir("victim");
  fs::create_directories(dir);
  const std::string token = "victims-token";
  std::ofstream(dir + "/token") << token << "\n";
  chmod((dir + "/token").c_str(), 0600);
  std::ofstream(dir + "/server.address") << "127.0.0.1:" << free_port() << "\n";

  Impostor impostor(fs::absolute(dir).string());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&impostor);
  auto server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  const std::string target = "127.0.0.1:" + std::to_string(port);

  auto [code, out] = shell(kBin + " stop --target " + target);
  EXPECT_EQ(code, 1) << out;
  for (const std::string& sent : impostor.seen()) {
    EXPECT_EQ(sent.find(token), std::string::npos) << "the victim's token went to " << target;
  }
  // Named explicitly, the run directory still does not send it elsewhere.
  std::tie(code, out) = shell(kBin + " stop --target " + target + " --run-dir " + dir);
  EXPECT_EQ(code, 1) << out;
  for (const std::string& sent : impostor.seen()) EXPECT_EQ(sent.find(token), std::string::npos);
  server->Shutdown(std::chrono::system_clock::now() + 1s);
}

// Two jobs on one machine: whichever one a command reached, by --target,
// --run-dir or the default port, every reply names it (run name and
// directory), and the help says how to address one.
TEST(SharedMachineTest, EveryControlReplyNamesTheJobItReached) {
  Job first({}, "-first");
  Job second({}, "-second");
  ASSERT_FALSE(first.address.empty());
  ASSERT_FALSE(second.address.empty());
  ASSERT_TRUE(wait_for([&] { return get_status(*first.stub()).learner_steps() > 0; }));
  ASSERT_TRUE(wait_for([&] { return get_status(*second.stub()).learner_steps() > 0; }));
  // Names it, and not the other job.
  auto expect_names = [&](const Job& job, const Job& other, const std::string& command) {
    auto [code, out] = shell(kBin + " " + command);
    EXPECT_EQ(code, 0) << command << "\n" << out;
    EXPECT_NE(out.find(job.name), std::string::npos) << command << "\n" << out;
    EXPECT_NE(out.find(fs::absolute(job.dir).string()), std::string::npos) << command << "\n"
                                                                           << out;
    EXPECT_EQ(out.find(other.name), std::string::npos) << command << "\n" << out;
  };
  expect_names(first, second, "status --target " + first.address);
  expect_names(second, first, "status --json --run-dir " + second.dir);
  expect_names(first, second, "scale --actors 2 --target " + first.address);
  expect_names(second, first, "checkpoint --run-dir " + second.dir);
  expect_names(first, second, "stop --now --target " + first.address);
  expect_names(second, first, "stop --run-dir " + second.dir);
  for (const char* command : {"status", "scale", "checkpoint", "stop"}) {
    auto [code, out] = shell(kBin + " " + command + " --help");
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("several jobs on one machine"), std::string::npos) << command << "\n" << out;
  }
}

TEST(SharedMachineTest, TwoJobsNeverShareARunDirectory) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  struct stat st {};
  ASSERT_EQ(stat(job.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string rest = " --set server.address=127.0.0.1:0 --set server.metrics_port=0";

  auto [code, out] = shell(kBin + " train --resume " + job.dir + rest);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("in use by another job (pid " + std::to_string(job.pid) + ")"),
            std::string::npos)
      << out;
  std::tie(code, out) = shell(kBin + " train --run-dir " + job.dir + rest);
  EXPECT_EQ(code, 2) << out;
  // The same run.name in the same run.dir, without --resume.
  const std::string parent = fs::path(job.dir).parent_path().string();
  std::tie(code, out) =
      shell(kBin + " train --set run.dir=" + parent + " --set run.name=" + job.name + rest);
  EXPECT_EQ(code, 2) << out;
  EXPECT_TRUE(fs::exists(job.dir + "/token")) << "nothing of the running job was removed";
  EXPECT_GT(get_status(*stub).learner_steps(), 0u);
  EXPECT_EQ(kill(job.pid, 0), 0) << "the first job still runs";
}

TEST(SharedMachineTest, ARunDirectoryPlantedByAnotherUserIsNeverAdopted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user (setpriv)";
  const std::string shared = test_dir("shared-runs");
  fs::create_directories(shared);
  chmod(shared.c_str(), 01777);  // a shared run.dir, like /tmp
  auto [code, out] = shell("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'mkdir " +
                           shared + "/victim && echo planted > " + shared +
                           "/victim/token && chmod 644 " + shared + "/victim/token'");
  ASSERT_EQ(code, 0) << out;
  const std::string rest = " --set server.address=127.0.0.1:0 --set server.metrics_port=0";
  std::tie(code, out) =
      shell(kBin + " train --set run.dir=" + shared + " --set run.name=victim" + rest);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("owned by uid 65534, not by this user"), std::string::npos) << out;
  std::tie(code, out) = shell(kBin + " train --resume " + shared + "/victim" + rest);
  EXPECT_EQ(code, 2) << out;

  // This user's own run directory whose token others may read: refused on resume.
  const std::string own = shared + "/own";
  std::tie(code, out) =
      shell(kBin + " train --run-dir " + own + " --set run.total_steps=20000" + rest);
  ASSERT_EQ(code, 0) << out;
  chmod((own + "/token").c_str(), 0644);
  std::tie(code, out) = shell(kBin + " train --resume " + own + rest);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("token file " + own + "/token: other users may read it"), std::string::npos)
      << out;
}

// `script` run by sh in a mount namespace of its own where `mount` is a tmpfs
// of `size`: the disk the job writes to can be filled without touching the
// machine's.
std::pair<int, std::string> on_small_tmpfs(const std::string& mount, const std::string& size,
                                           const std::string& script) {
  fs::create_directories(mount);
  return shell("unshare -m --propagation private sh -c 'mount -t tmpfs -o size=" + size +
               " tmpfs " + mount + " && " + script + "'");
}

TEST(SharedMachineTest, AFullDiskNeverLeavesAnEmptyTokenOrConfigAndCheckpointsAreRetried) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  const std::string mnt = test_dir("tmpfs");
  const std::string job = kBin + " --log-level warn train --set actor.count=1" +
                          " --set server.address=127.0.0.1:0 --set server.metrics_port=0";
  const std::string fill = "(dd if=/dev/zero of=" + mnt + "/filler bs=4k 2>/dev/null; true)";
  // A new run on a full disk: one clear line, nothing left behind. A finished
  // run resumed on a full disk: its files stay whole, and it resumes once
  // there is room.
  auto [code, out] = on_small_tmpfs(
      mnt, "2m",
      job + " --run-dir " + mnt + "/run --set run.total_steps=20000 && " + fill + " && " + job +
          " --run-dir " + mnt + "/new; echo new=$?; ls " + mnt + "; " + job + " --resume " + mnt +
          "/run --set run.total_steps=40000; echo resume=$?; wc -c < " + mnt +
          "/run/token; wc -c < " + mnt + "/run/config.toml; rm " + mnt + "/filler; " + job +
          " --resume " + mnt + "/run --set run.total_steps=40000; echo resumed=$?");
  if (out.find("mount:") != std::string::npos || out.find("unshare:") != std::string::npos) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << out;
  }
  EXPECT_NE(out.find("new=1"), std::string::npos) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nnew\n"), std::string::npos) << "the failed run's directory is gone\n"
                                                    << out;
  EXPECT_NE(out.find("resume=1"), std::string::npos) << out;
  EXPECT_NE(out.find("\n65\n"), std::string::npos) << "the token is whole\n" << out;
  EXPECT_EQ(out.find("\n0\n"), std::string::npos) << "no file was left empty\n" << out;
  EXPECT_NE(out.find("resumed=0"), std::string::npos) << out;
  EXPECT_EQ(out.find(".tmp"), std::string::npos) << out;
}

TEST(SharedMachineTest, APeriodicCheckpointOnAFullDiskIsRetriedAndTrainingGoesOn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  const std::string mnt = test_dir("tmpfs-ckpt");
  // Trains with a checkpoint a second; the disk fills after the first, and
  // frees four seconds later.
  auto [code, out] = on_small_tmpfs(
      mnt, "4m",
      kBin + " --log-level warn train --run-dir " + mnt +
          "/run --set actor.count=1 --set run.target_return=0 --set run.total_steps=1000000000"
          " --set run.checkpoint_interval_s=1 --set server.address=127.0.0.1:0"
          " --set server.metrics_port=0 & job=$!; "
          "for i in $(seq 100); do ls " +
          mnt +
          "/run/checkpoints/*.ckpt >/dev/null 2>&1 && break;"
          " sleep 0.1; done; "
          "dd if=/dev/zero of=" +
          mnt +
          "/filler bs=4k 2>/dev/null; sleep 4; "
          "echo alive=$(kill -0 $job && echo yes); ls -a " +
          mnt + "/run/checkpoints; rm " + mnt + "/filler; before=$(ls " + mnt +
          "/run/checkpoints | sort | tail -1); sleep 3; "
          "after=$(ls " +
          mnt +
          "/run/checkpoints | sort | tail -1); "
          "[ \"$before\" != \"$after\" ] && echo newer; kill $job; wait $job; echo exit=$?");
  if (out.find("mount:") != std::string::npos || out.find("unshare:") != std::string::npos) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << out;
  }
  EXPECT_NE(out.find("alive=yes"), std::string::npos) << out;
  EXPECT_NE(out.find("(No space left on device); training goes on"), std::string::npos) << out;
  EXPECT_EQ(out.find(".tmp"), std::string::npos) << "no temporary file left\n" << out;
  EXPECT_NE(out.find("newer"), std::string::npos) << "a checkpoint once there is room\n" << out;
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out;
}

}  // namespace
