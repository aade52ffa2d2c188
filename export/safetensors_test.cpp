// Safetensors bytes: what we write reads back; a file Pronghorn did not
// write, or a damaged one, is one clear error. (tests/export_test.cpp reads
// our files with the `safetensors` package itself.)
#include "export/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/error.h"

namespace pronghorn::exporting {
namespace {

Safetensors sample() {
  const float w[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  Safetensors file;
  file.tensors.push_back(float_tensor("torso.0.weight", {2, 3}, w));
  file.tensors.push_back(NamedTensor{"frames", Dtype::kUInt8, {3}, std::string("\x01\xff\x07", 3)});
  file.tensors.push_back(float_tensor("scalar", {}, w));
  file.metadata = {{"run", "a \"quoted\" name"}};
  return file;
}

// A file of this header and `data` bytes of data.
std::string with_header(const std::string& header, size_t data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data, '\0');
}

std::string error_of(const std::string& bytes) {
  try {
    decode_safetensors(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  const Safetensors file = sample();
  const std::string bytes = encode_safetensors(file);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ((8 + header) % 8, 0u);  // the data starts aligned
  EXPECT_EQ(bytes.size(), 8 + header + 24 + 3 + 4);
  const Safetensors back = decode_safetensors(bytes);
  ASSERT_EQ(back.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tensors[i].name, file.tensors[i].name);
    EXPECT_EQ(back.tensors[i].dtype, file.tensors[i].dtype);
    EXPECT_EQ(back.tensors[i].shape, file.tensors[i].shape);
    EXPECT_EQ(back.tensors[i].bytes, file.tensors[i].bytes);
  }
  EXPECT_EQ(back.metadata, file.metadata);
  ASSERT_NE(back.find("scalar"), nullptr);
  EXPECT_EQ(back.find("scalar")->floats()[0], 1.5f);
  EXPECT_EQ(back.find("missing"), nullptr);
}

TEST(SafetensorsTest, RefusesDamagedFilesNamingTheFault) {
  EXPECT_NE(error_of("1234").find("shorter than the 8 bytes"), std::string::npos);
  std::string long_header(8, '\0');
  long_header[0] = 100;
  EXPECT_NE(error_of(long_header + "{}").find("a header of 100 bytes"), std::string::npos);
  EXPECT_NE(error_of(with_header("{not json", 0)).find("not a JSON object"), std::string::npos);
  const std::string entry = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_EQ(error_of(with_header(entry, 8)), "");
  EXPECT_NE(error_of(with_header(entry, 4)).find("past its 4"), std::string::npos);
  EXPECT_NE(error_of(with_header(entry, 12)).find("4 bytes after the last tensor"),
            std::string::npos);
  EXPECT_NE(
      error_of(with_header(R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", 4))
          .find("dtype F16"),
      std::string::npos);
  EXPECT_NE(
      error_of(with_header(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8))
          .find("takes 12 bytes"),
      std::string::npos);
  EXPECT_NE(
      error_of(with_header(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}})", 8))
          .find("whole number"),
      std::string::npos);
  const std::string gap = R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
                          R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})";
  EXPECT_NE(error_of(with_header(gap, 3)).find("overlap or leave a gap"), std::string::npos);
  EXPECT_NE(error_of(with_header(R"({"__metadata__": {"n": 1}})", 0)).find("not a string"),
            std::string::npos);
}

}  // namespace
}  // namespace pronghorn::exporting
