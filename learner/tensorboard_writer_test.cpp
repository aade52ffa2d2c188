// The events files read back by a reader of our own (TFRecord framing, both
// CRCs, the Event messages), byte damage caught, a full disk survived. That
// TensorBoard's own reader agrees is tools/check-tensorboard's job.
#include "learner/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>

#include "proto/status_json.h"
#include "proto/tensorboard.pb.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/tb-" + std::to_string(getpid()) + "-" + what;
  fs::remove_all(dir);
  return dir;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint64_t le(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// A TFRecord reader written from the format's description, not from the
// writer: the events in order, or the first fault in `error`.
struct ReadBack {
  std::vector<tensorboard::Event> events;
  std::string error;
};

ReadBack read_events(const std::string& bytes) {
  ReadBack r;
  const auto fail = [&r](const char* why) {
    r.error = why;
    return r;
  };
  const auto masked = [](const std::string& data) {
    const uint32_t c = crc32c(data);
    return static_cast<uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u);
  };
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) return fail("truncated header");
    const uint64_t length = le(bytes, at, 8);
    if (le(bytes, at + 8, 4) != masked(bytes.substr(at, 8))) return fail("length crc");
    if (length > bytes.size() - at - 16) return fail("truncated record");
    const std::string data = bytes.substr(at + 12, length);
    if (le(bytes, at + 12 + length, 4) != masked(data)) return fail("data crc");
    tensorboard::Event e;
    if (!e.ParseFromString(data)) return fail("not an Event");
    r.events.push_back(e);
    at += 12 + length + 4;
  }
  return r;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir)) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(Crc32cTest, MatchesTheRfc3720Vectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(mask_crc(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc(0x80000000u), 0x00010000u + 0xa282ead8u);  // rotated right by 15
}

TEST(TensorBoardWriterTest, ReadsBackTheEventsItWrote) {
  const std::string dir = fresh_folder("readback");
  const double start = 1.7e9 + 0.25;
  std::string path;
  {
    TensorBoardWriter w(dir, start);
    ASSERT_TRUE(w.write(1000, start + 1, {{"loss/entropy", 0.6931}, {"learning_rate", 6e-4}}))
        << w.error();
    ASSERT_TRUE(w.write(2000, start + 2, {{"loss/entropy", 0.5}, {"episode_return/mean", -21}}))
        << w.error();
    path = w.path();
  }
  EXPECT_EQ(files_in(dir), std::vector<std::string>{path});
  const std::regex name(R"(events\.out\.tfevents\.1700000000\.[^/]+\.(\d+))");
  std::smatch m;
  const std::string base = fs::path(path).filename();
  ASSERT_TRUE(std::regex_match(base, m, name)) << base;
  EXPECT_EQ(m[1], std::to_string(getpid()));

  const ReadBack r = read_events(read_bytes(path));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(r.events[0].wall_time(), start);
  const auto& first = r.events[1];
  EXPECT_EQ(first.step(), 1000);
  EXPECT_EQ(first.wall_time(), start + 1);
  ASSERT_TRUE(first.has_summary());
  ASSERT_EQ(first.summary().value_size(), 2);
  EXPECT_EQ(first.summary().value(0).tag(), "loss/entropy");
  EXPECT_EQ(first.summary().value(0).simple_value(), 0.6931f);
  EXPECT_EQ(first.summary().value(1).tag(), "learning_rate");
  EXPECT_EQ(first.summary().value(1).simple_value(), 6e-4f);
  EXPECT_EQ(r.events[2].step(), 2000);
  EXPECT_EQ(r.events[2].summary().value(1).tag(), "episode_return/mean");
  EXPECT_EQ(r.events[2].summary().value(1).simple_value(), -21.0f);
  fs::remove_all(dir);
}

TEST(TensorBoardWriterTest, ReaderCatchesAnyCorruptedByte) {
  const std::string dir = fresh_folder("corrupt");
  std::string path;
  {
    TensorBoardWriter w(dir, 1.7e9);
    ASSERT_TRUE(w.write(7, 1.7e9 + 1, {{"sps", 1234.5}}));
    path = w.path();
  }
  const std::string good = read_bytes(path);
  ASSERT_EQ(read_events(good).error, "");
  // Every single bit flipped anywhere is caught, by one CRC or the other.
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    const ReadBack r = read_events(bad);
    EXPECT_NE(r.error, "") << "byte " << at << " flipped went unnoticed";
  }
  std::string length_hit = good;
  length_hit[0] = static_cast<char>(length_hit[0] ^ 1);
  EXPECT_EQ(read_events(length_hit).error, "length crc");
  std::string data_hit = good;
  data_hit[14] = static_cast<char>(data_hit[14] ^ 1);
  EXPECT_EQ(read_events(data_hit).error, "data crc");
  fs::remove_all(dir);
}

TEST(TensorBoardWriterTest, EachStartWritesItsOwnFile) {
  const std::string dir = fresh_folder("restart");
  {
    TensorBoardWriter first(dir, 1.7e9);
    ASSERT_TRUE(first.write(100, 1.7e9, {{"a", 1}}));
  }
  {
    TensorBoardWriter resumed(dir, 1.7e9);  // same second, same pid: a suffix, no append
    ASSERT_TRUE(resumed.write(200, 1.7e9, {{"a", 2}}));
  }
  const auto files = files_in(dir);
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) {
    const ReadBack r = read_events(read_bytes(f));
    ASSERT_EQ(r.error, "") << f;
    ASSERT_EQ(r.events.size(), 2u) << f;
    EXPECT_EQ(r.events[0].file_version(), "brain.Event:2");
  }
  fs::remove_all(dir);
}

TEST(TensorBoardWriterTest, AnUnwritableDirectoryFailsThenRecovers) {
  const std::string root = fresh_folder("unwritable");
  fs::create_directories(root);
  const std::string dir = root + "/tb";
  std::ofstream(dir) << "a file where the directory should be";
  TensorBoardWriter w(dir, 1.7e9);
  EXPECT_FALSE(w.write(1, 1.7e9, {{"a", 1}}));
  EXPECT_NE(w.error().find(dir), std::string::npos) << w.error();
  fs::remove(dir);
  ASSERT_TRUE(w.write(2, 1.7e9, {{"a", 2}})) << w.error();
  const ReadBack r = read_events(read_bytes(w.path()));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].step(), 2);
  fs::remove_all(root);
}

TEST(TensorBoardWriterTest, AFullDiskLeavesNoTornRecord) {
  const std::string dir = fresh_folder("full");
  TensorBoardWriter w(dir, 1.7e9);
  ASSERT_TRUE(w.write(1, 1.7e9, {{"a", 1}}));
  const auto before = fs::file_size(w.path());
  std::vector<Scalar> many;
  for (int i = 0; i < 200; ++i)
    many.push_back({"metric/" + std::to_string(i), static_cast<double>(i)});
  // The file-size limit stands in for a full disk: write(2) stores what fits,
  // then fails with EFBIG (SIGXFSZ ignored so that it is an error, not a kill).
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tight = old;
  tight.rlim_cur = before + 100;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tight), 0);
  const bool written = w.write(2, 1.7e9, many);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(written);
  EXPECT_NE(w.error().find("File too large"), std::string::npos) << w.error();
  EXPECT_EQ(fs::file_size(w.path()), before);
  ASSERT_TRUE(w.write(3, 1.7e9, many)) << w.error();
  const ReadBack r = read_events(read_bytes(w.path()));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[2].step(), 3);
  EXPECT_EQ(r.events[2].summary().value_size(), 200);
  fs::remove_all(dir);
}

TEST(StatusScalarsTest, TagsAreTheMetricsJsonlKeysInFourGroups) {
  v1::Status s;
  s.set_run_name("r");
  s.set_env_steps(123456);
  s.set_total_steps(1000000);
  s.set_stopping(true);
  s.set_learning_rate(3e-4);
  s.mutable_loss()->set_entropy(0.69);
  s.mutable_episode_return()->set_mean(-20.5);
  s.mutable_stage_time()->set_learner_wait_s(1.5);
  s.set_allreduce_s(0.25);
  s.set_eval_return_mean(std::nan(""));
  auto tags = [](const v1::Status& status) {
    std::map<std::string, double> by_tag;
    for (const Scalar& x : status_scalars(status)) {
      EXPECT_TRUE(by_tag.emplace(x.tag, x.value).second) << "duplicate " << x.tag;
    }
    return by_tag;
  };
  std::map<std::string, double> by_tag = tags(s);
  EXPECT_EQ(by_tag.at("train/learning_rate"), 3e-4);
  EXPECT_EQ(by_tag.at("train/loss/entropy"), 0.69);
  EXPECT_EQ(by_tag.at("train/episode_return/mean"), -20.5);
  EXPECT_EQ(by_tag.at("system/stage_time/learner_wait_s"), 1.5);
  EXPECT_EQ(by_tag.count("cluster/allreduce_s"), 0u) << "one rank: no cluster to plot";
  EXPECT_EQ(by_tag.count("train/env_steps"), 0u) << "the x axis";
  EXPECT_EQ(by_tag.count("system/total_steps"), 0u) << "a constant of the run";
  for (const auto& [tag, value] : by_tag) {
    EXPECT_EQ(tag.find("eval"), std::string::npos) << tag << ": evaluations have their own events";
  }

  s.set_world_size(2);
  s.add_ranks()->set_sps(10);
  s.add_ranks()->set_sps(20);
  by_tag = tags(s);
  EXPECT_EQ(by_tag.at("cluster/allreduce_s"), 0.25);
  EXPECT_EQ(by_tag.at("cluster/ranks/1/sps"), 20);
  // Every tag lies under one of the four groups, and past its group (and
  // outside the repeated rows) names a key of the metrics.jsonl line.
  const std::string json = status_json(s);
  for (const auto& [tag, value] : by_tag) {
    const std::string group = tag.substr(0, tag.find('/'));
    EXPECT_TRUE(group == "train" || group == "system" || group == "cluster") << tag;
    if (tag.rfind("cluster/ranks/", 0) == 0) continue;
    std::string key = tag.substr(group.size() + 1);
    std::replace(key.begin(), key.end(), '/', '_');
    EXPECT_NE(json.find("\"" + key + "\": "), std::string::npos) << key;
  }

  EXPECT_TRUE(evaluation_scalars(s).empty()) << "no evaluation yet";
  s.set_eval_return_mean(480);
  s.set_eval_return_std(3);
  s.set_eval_episodes(10);
  const std::vector<Scalar> evaluation = evaluation_scalars(s);
  ASSERT_EQ(evaluation.size(), 3u);
  EXPECT_EQ(evaluation[0].tag, "eval/return_mean");
  EXPECT_EQ(evaluation[0].value, 480);
  EXPECT_EQ(evaluation[2].tag, "eval/episodes");
}

}  // namespace
}  // namespace pronghorn::learner
