// The bytes of checkpoint files (learner/checkpoint_format.h): format 2's
// sections round-trip; files crafted with a right checksum and a wrong
// section are refused naming the section; a file the format-1 writer wrote
// still reads.
#include "learner/checkpoint_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/files.h"
#include "core/fnv.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/ckpt-format-" + std::to_string(getpid()) + "-" + what;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Two tensors, [2, 3] and [3], and state bytes with a NUL in them.
Checkpoint sample() {
  Checkpoint c;
  c.counters = {.env_steps = 6400, .learner_steps = 4, .episodes = 31, .policy_version = 6};
  c.parameters = {0.5f, -1.25f, 2.0f, 3.5f, -0.0f, 1e-30f, 7.0f, 8.0f, -9.0f};
  c.parameter_layout = {{"torso.0.weight", {2, 3}}, {"torso.0.bias", {3}}};
  c.optimizer = std::string("adam\0state", 10);
  c.rng = std::string("\x01\x00\x02", 3);
  return c;
}

void expect_same(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.counters, b.counters);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.parameter_layout, b.parameter_layout);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.rng, b.rng);
  EXPECT_EQ(a.return_stats, b.return_stats);
  EXPECT_EQ(a.observation_stats, b.observation_stats);
}

// What read_checkpoint() says of a file of `format` holding `payload` (its
// checksum right, as a crafted file's would be); "" when it reads.
std::string why_refused(const std::string& payload, int format = kFormatWritten) {
  const std::string path = fresh_folder("crafted") + "/crafted.ckpt";
  write_file_atomically(path, frame_payload(format, payload));
  std::string why;
  const bool read = read_checkpoint(path, &why).has_value();
  EXPECT_EQ(read, why.empty()) << why;
  return why;
}

std::vector<Section> with(std::vector<Section> sections, Section more) {
  sections.push_back(std::move(more));
  return sections;
}

TEST(CheckpointFormatTest, RoundTripsEverySectionWithNamesAndShapes) {
  const std::vector<Section> sections = sections_of(sample());
  ASSERT_EQ(sections.size(), 4u);
  EXPECT_EQ(sections[0].name, "counters");
  EXPECT_EQ(sections[1].name, "parameters");
  EXPECT_EQ(sections[2].name, "optimizer");
  EXPECT_EQ(sections[3].name, "rng");
  for (const Section& s : sections) EXPECT_EQ(s.flags, 0u) << s.name << " is required";

  const std::string path = fresh_folder("roundtrip") + "/" + checkpoint_file_name(6400);
  write_checkpoint_file(path, sample());
  const std::string bytes = read_file(path);
  EXPECT_EQ(bytes.substr(0, 8), "PHCKPT02");
  EXPECT_EQ(bytes, encode_checkpoint(sample()));
  std::string why;
  const std::optional<Checkpoint> c = read_checkpoint(path, &why);
  ASSERT_TRUE(c) << why;
  expect_same(*c, sample());
}

// learner/testing/cartpole_format1.ckpt: written by the format-1 writer
// (commit 6c4d8ac) as `pronghorn train --set run.total_steps=2000 --set
// run.target_return=0 --set actor.count=1` on CartPole with the default
// model (4675 parameters) and Adam, stopping at 2048 env steps; the values
// below were read from its bytes then.
TEST(CheckpointFormatTest, ReturnScalingStatisticsRoundTripInAnOptionalSection) {
  Checkpoint c = sample();
  c.return_stats = ReturnStats{.count = 12345.0, .mean = -0.25, .var = 3.5};
  const std::vector<Section> sections = sections_of(c);
  ASSERT_EQ(sections.size(), 5u);
  EXPECT_EQ(sections[4].name, "return_scaling");
  EXPECT_EQ(sections[4].flags, kSectionOptional) << "the policy means the same without it";
  const std::string path = fresh_folder("return-stats") + "/" + checkpoint_file_name(6400);
  write_checkpoint_file(path, c);
  std::string why;
  const std::optional<Checkpoint> back = read_checkpoint(path, &why);
  ASSERT_TRUE(back) << why;
  expect_same(*back, c);

  std::vector<Section> bad = sections_of(sample());
  EXPECT_EQ(why_refused(encode_sections(with(bad, {"return_scaling", kSectionOptional, "short"}))),
            "section \"return_scaling\" holds 5 bytes, expected 24");
  std::string negative(24, '\0');
  const double count = 1.0, var = -1.0;
  std::memcpy(negative.data(), &count, 8);
  std::memcpy(negative.data() + 16, &var, 8);
  EXPECT_EQ(why_refused(encode_sections(with(bad, {"return_scaling", kSectionOptional, negative}))),
            "section \"return_scaling\": count 1, mean 0, var -1 are not statistics");
}

TEST(CheckpointFormatTest, ReadsTheFormat1FileTheEarlierWriterWrote) {
  const std::string path = PRONGHORN_CHECKPOINT_V1;
  ASSERT_EQ(read_file(path).substr(0, 8), "PHCKPT01");
  std::string why;
  const std::optional<Checkpoint> c = read_checkpoint(path, &why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(
      c->counters,
      (RunCounters{.env_steps = 2048, .learner_steps = 2, .episodes = 79, .policy_version = 3}));
  ASSERT_EQ(c->parameters.size(), 4675u);
  EXPECT_TRUE(c->parameter_layout.empty()) << "format 1 names no parameter";
  EXPECT_EQ(c->parameters[0], 0x1.06bd74p-2f);
  EXPECT_EQ(c->parameters[4674], -0x1.16988cp-4f);
  EXPECT_EQ(fnv1a(std::string_view(reinterpret_cast<const char*>(c->parameters.data()),
                                   c->parameters.size() * sizeof(float))),
            0xdaaacd59ebd75d8dull);
  EXPECT_EQ(c->optimizer.size(), 52254u);
  EXPECT_EQ(c->rng.size(), 5056u);
}

// Required: a reader that did not apply them would run another policy.
TEST(CheckpointFormatTest, ObservationStatisticsRoundTripInARequiredSection) {
  Checkpoint c = sample();
  ObservationStats stats(3);
  stats.count = 4096.0001;
  stats.mean = {0.5, -3.0, 1e6};
  stats.var = {2.0, 0.0, 1e-3};
  c.observation_stats = stats;
  const std::vector<Section> sections = sections_of(c);
  ASSERT_EQ(sections.size(), 5u);
  EXPECT_EQ(sections[4].name, "observation_statistics");
  EXPECT_EQ(sections[4].flags, 0u) << "required: an older pronghorn must refuse the file";
  EXPECT_EQ(sections[4].body.size(), 8u * 7);
  const std::string path = fresh_folder("observation-stats") + "/" + checkpoint_file_name(6400);
  write_checkpoint_file(path, c);
  std::string why;
  const std::optional<Checkpoint> back = read_checkpoint(path, &why);
  ASSERT_TRUE(back) << why;
  expect_same(*back, c);

  const std::vector<Section> plain = sections_of(sample());
  EXPECT_EQ(
      why_refused(encode_sections(with(plain, {"observation_statistics", 0, "fifteen bytes.."}))),
      "section \"observation_statistics\" holds 15 bytes, expected 8 × (1 + 2d) for d "
      "observation values");
  EXPECT_EQ(why_refused(
                encode_sections(with(plain, {"observation_statistics", 0, std::string(32, '\0')}))),
            "section \"observation_statistics\" holds 32 bytes, expected 8 × (1 + 2d) for d "
            "observation values");
  std::string negative(24, '\0');  // count 1, mean 0, var -1
  const double count = 1.0, var = -1.0;
  std::memcpy(negative.data(), &count, 8);
  std::memcpy(negative.data() + 16, &var, 8);
  EXPECT_EQ(why_refused(encode_sections(with(plain, {"observation_statistics", 0, negative}))),
            "section \"observation_statistics\": count 1 with 1 means and variances that are "
            "not statistics (each finite, count above 0, variances at least 0)");
}

TEST(CheckpointFormatTest, AnUnknownSectionIsRefusedByNameUnlessMarkedOptional) {
  const std::vector<Section> sections = sections_of(sample());
  EXPECT_EQ(why_refused(encode_sections(with(sections, {"value_normalization", 0, "stats"}))),
            "section \"value_normalization\" is not one this pronghorn reads and is not marked "
            "optional (a newer pronghorn's checkpoint?)");
  const std::string optional =
      encode_sections(with(sections, {"notes", kSectionOptional, "trained on a Tuesday"}));
  EXPECT_EQ(why_refused(optional), "");
  EXPECT_EQ(why_refused(encode_sections(with(sections, {"notes", 6, ""}))),
            "section \"notes\" has flags 0x6, this pronghorn knows only 0x1 (optional)");
  EXPECT_EQ(why_refused(encode_sections(with(sections, {"Bad Name", kSectionOptional, ""}))),
            "malformed payload: section 4 is named \"Bad\\x20Name\" (1 to 64 of [a-z0-9_])");
}

TEST(CheckpointFormatTest, ADuplicatedOrMissingSectionIsRefusedByName) {
  std::vector<Section> sections = sections_of(sample());
  EXPECT_EQ(why_refused(encode_sections(with(sections, sections[3]))),
            "section \"rng\" appears twice");
  sections.erase(sections.begin() + 2);
  EXPECT_EQ(why_refused(encode_sections(sections)), "no \"optimizer\" section");
}

TEST(CheckpointFormatTest, ATruncatedSectionIsRefusedByNameThoughItsChecksumHolds) {
  const std::string whole = encode_sections(sections_of(sample()));
  // The rng section is last: its 3 bytes of body cut to 1.
  EXPECT_EQ(why_refused(whole.substr(0, whole.size() - 2)),
            "section \"rng\" is truncated: 3 bytes declared, 1 left in the payload");
  EXPECT_EQ(why_refused(whole.substr(0, whole.size() - 3 - 8)),
            "section \"rng\" is truncated: its header runs past the payload's end");

  std::vector<Section> sections = sections_of(sample());
  sections[0].body.resize(24);
  EXPECT_EQ(why_refused(encode_sections(sections)),
            "section \"counters\" holds 24 bytes, expected 32 (four u64)");
  sections = sections_of(sample());
  sections[1].body.resize(sections[1].body.size() - 4);  // the bias's last float
  EXPECT_EQ(why_refused(encode_sections(sections)),
            "section \"parameters\" is truncated in \"torso.0.bias\"'s data");
  sections = sections_of(sample());
  sections[1].body += "more";
  EXPECT_EQ(why_refused(encode_sections(sections)),
            "section \"parameters\" has 4 bytes after its 2 tensors");
}

// A parameters section of one tensor named `name` of shape `dims` holding `floats`.
std::string tensor_section(const std::string& name, std::vector<uint64_t> dims, size_t floats,
                           uint64_t count = 1) {
  std::string body;
  auto u64 = [&](uint64_t v) { body.append(reinterpret_cast<const char*>(&v), 8); };
  u64(count);
  u64(name.size());
  body += name;
  u64(dims.size());
  for (uint64_t d : dims) u64(d);
  u64(floats * 4);
  body.append(floats * 4, '\0');
  std::vector<Section> sections = sections_of(sample());
  sections[1].body = body;
  return encode_sections(sections);
}

TEST(CheckpointFormatTest, ParameterSizesAndNamesInTheFileAreNeverTrusted) {
  EXPECT_EQ(why_refused(tensor_section("w", {9}, 9)), "") << "the crafting itself is right";
  EXPECT_EQ(why_refused(tensor_section("w", {9}, 9, uint64_t{1} << 60)),
            "section \"parameters\" promises 1152921504606846976 tensors in 69 bytes");
  EXPECT_EQ(why_refused(tensor_section("w", std::vector<uint64_t>(9, 1), 1)),
            "parameter \"w\" has rank 9, at most 8");
  EXPECT_EQ(why_refused(tensor_section("w", {uint64_t{1} << 32, uint64_t{1} << 32}, 1)),
            "parameter \"w\" has a dimension of 4294967296: no model is that large");
  EXPECT_EQ(why_refused(tensor_section("w", {3, 3}, 8)),
            "parameter \"w\" holds 32 bytes, its shape [3, 3] needs 36 (float32)");
  EXPECT_EQ(why_refused(tensor_section("w\n\"x", {9}, 9)),
            "section \"parameters\": parameter tensor 0 is named \"w\\x0a\\x22x\" (1 to 256 of "
            "[A-Za-z0-9_.])");
  std::vector<Section> sections = sections_of(sample());
  Checkpoint twice = sample();
  twice.parameter_layout = {{"w", {3}}, {"w", {6}}};
  sections[1] = sections_of(twice)[1];
  EXPECT_EQ(why_refused(encode_sections(sections)),
            "section \"parameters\": parameter \"w\" appears twice");
}

TEST(CheckpointFormatTest, ANewerFormatOrAnotherFileIsRefusedSayingSo) {
  const std::string payload = encode_sections(sections_of(sample()));
  EXPECT_EQ(why_refused(payload, 3),
            "a checkpoint of format 03, this pronghorn reads formats 01 to 02 (a newer "
            "pronghorn's?)");
  EXPECT_EQ(why_refused(payload, 1).rfind("malformed payload: ", 0), 0u)
      << "format 2 bytes under a format-1 magic";
  const std::string path = fresh_folder("other") + "/other.ckpt";
  write_file_atomically(path, std::string(64, 'x'));
  std::string why;
  EXPECT_FALSE(read_checkpoint(path, &why));
  EXPECT_EQ(why, "not a checkpoint (no PHCKPT02 or PHCKPT01 header)");
}

TEST(CheckpointFormatTest, LoadingOneFileNamesTheFileAndTheSection) {
  std::vector<Section> sections = sections_of(sample());
  const std::string path = fresh_folder("load") + "/" + checkpoint_file_name(6400);
  write_file_atomically(
      path, frame_payload(kFormatWritten, encode_sections(with(sections, sections[0]))));
  try {
    load_checkpoint(path);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + path + ": section \"counters\" appears twice");
  }
}

}  // namespace
}  // namespace pronghorn::learner
