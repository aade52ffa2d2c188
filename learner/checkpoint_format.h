// The bytes of a checkpoint file (docs/architecture.md §6): written as
// format 2, named sections; read as format 2 or as format 1, the single
// record written before sections. Numbers are little-endian (static_assert
// in the .cpp); a `str` is a u64 size and that many bytes.
//
//   file      = magic[8] payload_size:u64 payload fnv1a(payload):u64
//   magic     = "PHCKPT02" | "PHCKPT01"
//
//   PHCKPT02 payload = section section ...   (up to the payload's end)
//   section   = name:str flags:u64 body:str
//     name    1 to 64 of [a-z0-9_]; each name at most once
//     flags   bit 0: optional (see below); every other bit 0
//   "counters"    body = env_steps learner_steps episodes policy_version, u64 each
//   "parameters"  body = count:u64, then per parameter tensor, in the model's
//                 registration order (their floats, concatenated, are the
//                 model's flat vector): name:str rank:u64 dims:u64[rank]
//                 data:str (float32, product(dims) of them)
//   "optimizer"   body = LibTorch's serialised optimizer state (written keyed by
//                 parameter index: learner/optimizer_archive.h)
//   "rng"         body = the learner's CPU generator state
//   All four are required.
//   "return_scaling" (optional) body = count mean var, f64 each: the
//                 running statistics of loss.return_scaling
//                 (learner/return_scaling.h); training goes on without
//                 them, the policy means the same.
//   "observation_statistics" (required when present) body = count:f64,
//                 then mean:f64[d], var:f64[d] for observations of d
//                 floats: model.normalize_observations' running statistics
//                 (model/observation_norm.h), of the parameters' policy
//                 version; the policy acts on normalised inputs only with
//                 them, so an older reader must refuse the file.
//
//   PHCKPT01 payload = env_steps learner_steps episodes policy_version (u64
//                      each) parameters:str (flat float32) optimizer:str rng:str
//
// A section this reader does not know is refused, naming it, unless its
// optional flag is set: then it is skipped. A later section that changes
// what the checkpoint means (observation normalisation statistics, without
// which the policy acts on other inputs) is written required, so that an
// older reader refuses the file instead of running a different policy; one
// that only informs (notes, provenance) is written optional. A section's
// body keeps its layout for good: a new layout is a new section name. The
// magic changes only when the framing above does.
//
// Every size in a payload is checked against the bytes left before it is
// used; the framing (learner/checkpoint.cpp) bounds the payload by the
// file's size and the caller's limit and checks the checksum first.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "learner/checkpoint.h"

namespace pronghorn::learner {

inline constexpr char kMagicPrefix[] = "PHCKPT";  // then two digits: the format
inline constexpr int kFormatWritten = 2;
inline constexpr uint64_t kSectionOptional = 1;  // a section's flags

inline constexpr uint64_t kFileHeaderBytes = 16, kFileTrailerBytes = 8;

// One section of a format-2 payload.
struct Section {
  std::string name;
  uint64_t flags = 0;
  std::string body;
};

// The sections that hold `c`, in the order they are written. `c`'s
// parameter_layout must cover its parameters exactly (aborts otherwise).
std::vector<Section> sections_of(const Checkpoint& c);

// A format-2 payload of `sections`, as given (tests craft wrong ones).
std::string encode_sections(const std::vector<Section>& sections);

// The whole file: magic of `format`, size, payload, checksum.
std::string frame_payload(int format, std::string_view payload);

// The file that holds `c`, in the format written.
std::string encode_checkpoint(const Checkpoint& c);

// The checkpoint in the payload of a file of `format` (1 or 2), or nothing
// with `why` set to what is wrong, naming the section or parameter. Checks
// the layout, not the values (checkpoint.cpp checks counters and finiteness).
std::optional<Checkpoint> decode_payload(int format, std::string_view payload, std::string* why);

}  // namespace pronghorn::learner
