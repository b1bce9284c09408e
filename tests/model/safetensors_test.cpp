// safetensors reader/writer: round trips, dtype conversion on read, and hostile files (each must
// be refused with a corrupt_data error that names the problem).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_ / name; }

  // Writes raw bytes: the 8-byte length (`header_len` or the real one), the header, then `data`.
  std::string write_raw(const std::string& name, const std::string& header, const std::vector<uint8_t>& data,
                        int64_t header_len = -1) {
    const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    std::ofstream out(path(name), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return path(name);
  }

  // Opens `p`, expects corrupt_data whose message contains every fragment.
  void expect_corrupt(const std::string& p, std::initializer_list<std::string> fragments) {
    auto f = open_safetensors(p);
    ASSERT_FALSE(f.ok()) << "accepted a hostile file " << p;
    EXPECT_EQ(f.status().code(), StatusCode::corrupt_data) << f.status().to_string();
    for (const auto& frag : fragments)
      EXPECT_NE(f.status().message().find(frag), std::string::npos)
          << "message lacks '" << frag << "': " << f.status().message();
    EXPECT_NE(f.status().message().find(p), std::string::npos) << "message does not name the file";
  }

  testing::TempDir dir_{"st"};
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST_F(SafetensorsTest, RoundTripIsBitwiseAndKeepsMetadata) {
  std::vector<float> a = {1.f, -2.5f, 3.25f, 1e-30f, -0.f, 7.f};
  std::vector<float> b = {0.1f, 0.2f, 0.3f};
  float scalar = 42.f;
  std::vector<TensorRef> ts = {{"layer.a", {2, 3}, a.data()}, {"b", {3}, b.data()}, {"s", {}, &scalar},
                               {"empty", {0, 4}, nullptr}};
  ASSERT_TRUE(write_safetensors(path("x.safetensors"), ts, {{"k", "v"}, {"arch", "gpt2"}}).ok());

  auto f = open_safetensors(path("x.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->names().size(), 4u);
  EXPECT_TRUE(f->has("layer.a"));
  EXPECT_FALSE(f->has("nope"));
  EXPECT_EQ(f->info("layer.a")->shape, (Shape{2, 3}));
  EXPECT_EQ(f->info("layer.a")->dtype, StDType::f32);
  EXPECT_EQ(f->info("s")->shape, Shape{});
  EXPECT_EQ(f->info("nope").status().code(), StatusCode::not_found);
  auto ra = f->read_f32("layer.a");
  ASSERT_TRUE(ra.ok());
  ASSERT_EQ(ra->size(), a.size());
  EXPECT_EQ(std::memcmp(ra->data(), a.data(), a.size() * 4), 0);
  EXPECT_EQ(*f->read_f32("b"), b);
  EXPECT_EQ(f->read_f32("s")->at(0), 42.f);
  EXPECT_TRUE(f->read_f32("empty")->empty());
  EXPECT_EQ(f->metadata().at("k"), "v");
  EXPECT_EQ(f->metadata().at("arch"), "gpt2");

  // The header is padded so the data section starts 8-byte aligned, as the format asks.
  std::ifstream in(path("x.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST_F(SafetensorsTest, WriteReplacesAtomicallyAndLeavesNoTempFile) {
  std::vector<float> a = {1, 2, 3}, b = {4, 5};
  ASSERT_TRUE(write_safetensors(path("w.safetensors"), {TensorRef{"a", {3}, a.data()}}).ok());
  ASSERT_TRUE(write_safetensors(path("w.safetensors"), {TensorRef{"b", {2}, b.data()}}).ok());
  auto f = open_safetensors(path("w.safetensors"));
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has("a"));
  EXPECT_EQ(*f->read_f32("b"), b);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  std::vector<float> a = {1, 2};
  Status dup = write_safetensors(path("d.safetensors"), {TensorRef{"a", {2}, a.data()}, TensorRef{"a", {2}, a.data()}});
  EXPECT_EQ(dup.code(), StatusCode::invalid_argument);
  EXPECT_NE(dup.message().find("twice"), std::string::npos);
  EXPECT_FALSE(write_safetensors(path("d.safetensors"), {TensorRef{"__metadata__", {2}, a.data()}}).ok());
  EXPECT_FALSE(write_safetensors(path("d.safetensors"), {NamedTensor{"a", {3}, {1.f, 2.f}}}).ok());
  EXPECT_FALSE(fs::exists(path("d.safetensors")));
  Status nodir = write_safetensors(path("no/such/dir/x.safetensors"), {TensorRef{"a", {2}, a.data()}});
  EXPECT_EQ(nodir.code(), StatusCode::io_error);
}

TEST_F(SafetensorsTest, ConvertsHalfTypesAndIntegersOnRead) {
  // F16: 1.0, -2.0, 0.5, 65504; BF16: 1.0, -3.0, 0.15625 (0x3E20); F64: 0.25; I32: 7, -1; I64: 5, -9.
  std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3800, 0x7BFF};
  std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x3E20};
  double f64 = 0.25;
  std::vector<int32_t> i32 = {7, -1};
  std::vector<int64_t> i64 = {5, -9};
  std::vector<int64_t> big = {int64_t{1} << 40};
  std::vector<uint8_t> data;
  auto append = [&](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  };
  append(f16.data(), 8);
  append(bf16.data(), 6);
  append(&f64, 8);
  append(i32.data(), 8);
  append(i64.data(), 16);
  append(big.data(), 8);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[14,22]},)"
      R"("i":{"dtype":"I32","shape":[2],"data_offsets":[22,30]},)"
      R"("l":{"dtype":"I64","shape":[2],"data_offsets":[30,46]},)"
      R"("big":{"dtype":"I64","shape":[1],"data_offsets":[46,54]}})";
  auto f = open_safetensors(write_raw("types.safetensors", header, data));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->read_f32("h"), (std::vector<float>{1.f, -2.f, 0.5f, 65504.f}));
  EXPECT_EQ(*f->read_f32("b"), (std::vector<float>{1.f, -3.f, 0.15625f}));
  EXPECT_EQ(*f->read_f32("d"), (std::vector<float>{0.25f}));
  EXPECT_EQ(*f->read_i32("i"), (std::vector<int32_t>{7, -1}));
  EXPECT_EQ(*f->read_i32("l"), (std::vector<int32_t>{5, -9}));
  EXPECT_EQ(f->info("b")->dtype, StDType::bf16);
  // Integer data is not silently read as floats, nor floats as integers, nor I64 truncated.
  EXPECT_FALSE(f->read_f32("i").ok());
  EXPECT_FALSE(f->read_i32("h").ok());
  auto r = f->read_i32("big");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("32 bits"), std::string::npos);
  std::vector<float> wrong(3);
  EXPECT_FALSE(f->read_f32_into("h", wrong.data(), 3).ok());
}

TEST_F(SafetensorsTest, MissingFileIsIoError) {
  auto f = open_safetensors(path("absent.safetensors"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::io_error);
  EXPECT_NE(f.status().message().find("absent.safetensors"), std::string::npos);
}

TEST_F(SafetensorsTest, RejectsTruncatedAndAbsurdHeaders) {
  {
    std::ofstream out(path("short.safetensors"), std::ios::binary);
    out.write("abc", 3);
  }
  expect_corrupt(path("short.safetensors"), {"shorter than the 8-byte header length"});
  expect_corrupt(write_raw("past.safetensors", "{}", {}, 1000), {"header length 1000", "past the end"});
  expect_corrupt(write_raw("huge.safetensors", "{}", {}, int64_t{1} << 40), {"exceeds", "limit"});
  expect_corrupt(write_raw("json.safetensors", R"({"a": {"dtype": "F32",)", {}), {"not valid JSON"});
  expect_corrupt(write_raw("array.safetensors", "[1, 2]", {}), {"not a JSON object"});
}

TEST_F(SafetensorsTest, RejectsBadTensorEntries) {
  const auto d8 = f32_bytes({1, 2});
  struct Case {
    const char* file;
    std::string header;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"nodtype", R"({"x":{"shape":[2],"data_offsets":[0,8]}})", {"'x'", "dtype"}},
      {"noshape", R"({"x":{"dtype":"F32","data_offsets":[0,8]}})", {"'x'", "shape"}},
      {"nooffsets", R"({"x":{"dtype":"F32","shape":[2]}})", {"'x'", "data_offsets"}},
      {"badoffsets", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", {"'x'", "data_offsets"}},
      {"notobj", R"({"x":3})", {"'x'", "not a JSON object"}},
      {"dtype", R"({"x":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,8]}})", {"'x'", "unsupported dtype 'F8_E4M3'"}},
      {"range", R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", {"'x'", "past the data section"}},
      {"order", R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", {"'x'", "end before begin"}},
      {"size", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", {"'x'", "needs 12"}},
      {"negshape", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", {"'x'", "non-negative"}},
      {"overflow", R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
       {"'x'", "overflows"}},
      {"overflow_bytes", R"({"x":{"dtype":"F32","shape":[2305843009213693952,2],"data_offsets":[0,8]}})",
       {"'x'", "overflows"}},
      {"overlap",
       R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       {"'x'", "'y'", "overlap"}},
      {"duplicate",
       R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       {"'x'", "twice"}},
      {"metadata", R"({"__metadata__":{"k":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       {"metadata", "'k'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto f = open_safetensors(write_raw(std::string(c.file) + ".safetensors", c.header, d8));
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), StatusCode::corrupt_data);
    for (const auto& frag : c.fragments)
      EXPECT_NE(f.status().message().find(frag), std::string::npos)
          << "message lacks '" << frag << "': " << f.status().message();
  }
}

TEST_F(SafetensorsTest, AcceptsWhatTheFormatAllows) {
  // Padding spaces after the JSON, tensors stored out of name order, and an unknown extra field.
  const auto data = f32_bytes({1, 2, 3});
  auto f = open_safetensors(write_raw(
      "ok.safetensors",
      R"({"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12],"extra":1}}   )",
      data));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->names(), (std::vector<std::string>{"z", "a"}));  // data order
  EXPECT_EQ(*f->read_f32("a"), (std::vector<float>{2, 3}));
}

}  // namespace
}  // namespace tessera
