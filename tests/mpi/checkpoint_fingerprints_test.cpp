// Logical fingerprints across layouts, at 4 ranks: checkpoints saved under dp 2 x tp 2 and under a
// ZeRO-3-like layout (dp 4, two units per rank, each owning a slice of the flat buffer that cuts
// tensors mid-row) load into dp 4, pp 2 x dp 2 and one rank with the fingerprints verified
// (verify_loaded_fingerprints: every rank's owned pieces, summed across ranks) and bitwise contents;
// both hold the same state, so their fingerprints are equal key by key. A dropped piece, a
// duplicated range and a zeroed moment, planted with valid checksums and coverage, are refused on
// every rank naming the tensor. A checkpoint converted to safetensors and back diffs as equal.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/diff.h"
#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "comm/grid.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "mpi_test_world.h"
#include "optim/adamw.h"
#include "train/checkpoint_convert.h"
#include "train/checkpoint_fingerprints.h"
#include "train/train_checkpoint.h"

using namespace tessera;
using tessera::testing::world;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kSeed = 99;
constexpr int64_t kStep = 7;

ModelConfig tiny_config() {
  ModelConfig cfg = model_preset("tiny").value();  // C 64, NH 4, tied head
  cfg.n_layer = 2;                                   // one layer per stage at pp 2
  cfg.vocab_size = 255;                              // tp 2 pads the last shard by a row
  return cfg;
}

// The AdamW moment of element i of tensor `name` (which 0: m, 1: v): a function of the logical element.
float moment(const std::string& name, int64_t i, int which) {
  uint64_t x = std::hash<std::string>{}(name) ^ (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull) ^ (which ? 0x77ull : 0);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - (which ? 0.f : 0.5f);
}

struct Shard {
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<AdamW> opt;
};

// Layers [first, last) at tensor-parallel shard tp, with the known parameters and moments.
Shard make_shard(const ModelConfig& cfg, int first, int last, TensorParallelShard tp) {
  Shard s;
  s.store = std::make_unique<ParamStore>(ParamLayout(cfg, first, last, tp));
  s.opt = std::make_unique<AdamW>(s.store->layout(), AdamWConfig{});
  init_parameters(*s.store, cfg, kSeed);
  for (const ParamInfo& p : s.store->layout().params()) {
    float* m = s.opt->m() + p.offset;
    float* v = s.opt->v() + p.offset;
    std::fill(m, m + p.numel, 0.f);
    std::fill(v, v + p.numel, 0.f);
    for (const TensorPiece& q : s.store->layout().shard_pieces(p))
      for (int64_t k = 0; k < q.numel; ++k) {
        m[q.local_offset + k] = moment(p.name, q.global_offset + k, 0);
        v[q.local_offset + k] = moment(p.name, q.global_offset + k, 1);
      }
  }
  return s;
}

// NaN everywhere, so anything a load leaves unwritten shows up.
void poison(Shard& s) {
  std::memset(s.store->params(), 0xff, static_cast<size_t>(s.store->numel()) * sizeof(float));
  std::memset(s.opt->m(), 0xff, static_cast<size_t>(s.opt->numel()) * sizeof(float));
  std::memset(s.opt->v(), 0xff, static_cast<size_t>(s.opt->numel()) * sizeof(float));
}

// Every tensor's parameters and moments bitwise equal.
void expect_same(const Shard& got, const Shard& want, const std::string& where) {
  for (const ParamInfo& p : want.store->layout().params()) {
    const size_t bytes = static_cast<size_t>(p.numel) * sizeof(float);
    EXPECT_EQ(std::memcmp(got.store->params() + p.offset, want.store->params() + p.offset, bytes), 0) << where << p.name;
    EXPECT_EQ(std::memcmp(got.opt->m() + p.offset, want.opt->m() + p.offset, bytes), 0) << where << p.name;
    EXPECT_EQ(std::memcmp(got.opt->v() + p.offset, want.opt->v() + p.offset, bytes), 0) << where << p.name;
  }
}

std::string shared_temp_dir(Communicator& comm) {
  char path[256] = {};
  if (comm.rank() == 0) {
    std::string t = (fs::temp_directory_path() / "tessera_ckpt_fingerprints_XXXXXX").string();
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) std::snprintf(path, sizeof path, "%s", buf.data());
  }
  EXPECT_TRUE(comm.broadcast(path, sizeof path, DType::u8, 0).ok());
  return path;
}

std::string step_dir(const std::string& run) { return run + "/checkpoints/" + checkpoint::step_dir_name(kStep); }

// Saves the known state under dp 2 x tp 2: each rank its tp shard, cut to its dp half.
std::string save_dp2_tp2(Communicator& w, const std::string& root, const ModelConfig& cfg) {
  auto grid = Grid::create(w, GridShape{2, 1, 2});
  EXPECT_TRUE(grid.ok());
  const GridCoord at = grid->coord();
  Shard s = make_shard(cfg, 0, static_cast<int>(cfg.n_layer), TensorParallelShard{at.tp, 2});
  const int64_t n = s.store->numel();
  const std::string run = root + "/dp2_tp2";
  Status st = save_training_checkpoint(w, run, cfg, *s.store, *s.opt, FlatRange{n * at.dp / 2, n * (at.dp + 1) / 2},
                                       TrainingState{kStep, {1, 5}, kStep}, 1, json::object());
  EXPECT_TRUE(st.ok()) << st.message();
  return step_dir(run);
}

// Saves it as ZeRO-3 shards it: the flat buffer in 8 slices, rank r owning slices r and r + 4
// (two units per rank), the cuts falling inside tensors.
std::string save_zero3(Communicator& w, const std::string& root, const ModelConfig& cfg) {
  Shard s = make_shard(cfg, 0, static_cast<int>(cfg.n_layer), {});
  const int64_t n = s.store->numel();
  std::vector<CheckpointChunk> chunks;
  for (int unit : {w.rank(), w.rank() + 4})
    chunks.push_back({s.store.get(), s.opt.get(), FlatRange{n * unit / 8 + 3, n * (unit + 1) / 8 + 3}});
  if (w.rank() == 0) chunks.push_back({s.store.get(), s.opt.get(), FlatRange{0, 3}});
  if (w.rank() == 3) chunks.back().owned.end = n;
  const std::string run = root + "/zero3";
  Status st = save_training_checkpoint(w, run, cfg, chunks, TrainingState{kStep, {1, 5}, kStep}, 1, json::object());
  EXPECT_TRUE(st.ok()) << st.message();
  return step_dir(run);
}

// Loads `dir` into dp 4 (the whole model on every rank, each owning a quarter) and verifies.
Result<int64_t> load_dp4(Communicator& w, const std::string& dir, const ModelConfig& cfg, Shard* out = nullptr) {
  Shard s = make_shard(cfg, 0, static_cast<int>(cfg.n_layer), {});
  poison(s);
  auto loaded = load_training_checkpoint(dir, cfg, *s.store, s.opt.get());
  if (!loaded.ok()) return loaded.status();
  const int64_t n = s.store->numel();
  auto verified = verify_loaded_fingerprints(
      w, dir, {CheckpointChunk{s.store.get(), s.opt.get(), FlatRange{n * w.rank() / 4, n * (w.rank() + 1) / 4}}});
  if (out) *out = std::move(s);
  return verified;
}

int64_t model_tensors(const ModelConfig& cfg) {
  return 3 * static_cast<int64_t>(ParamLayout(cfg).params().size());  // param, adam_m, adam_v
}

class CheckpointFingerprints : public ::testing::Test {
 protected:
  void SetUp() override {
    if (world().size() != 4) GTEST_SKIP() << "run at 4 ranks";
    root_ = shared_temp_dir(world());
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override {
    if (root_.empty()) return;
    ASSERT_TRUE(world().barrier().ok());
    if (world().rank() == 0) fs::remove_all(root_);
  }
  std::string root_;
  ModelConfig cfg_ = tiny_config();
};

TEST_F(CheckpointFingerprints, SavedLayoutsLoadIntoOthersWithFingerprintsVerified) {
  Communicator& w = world();
  const Shard whole = make_shard(cfg_, 0, static_cast<int>(cfg_.n_layer), {});
  const int64_t tensors = model_tensors(cfg_);
  const std::string a = save_dp2_tp2(w, root_, cfg_), z = save_zero3(w, root_, cfg_);
  auto self = w.split(w.rank(), 0, "self");
  ASSERT_TRUE(self.ok());
  for (const std::string& dir : {a, z}) {
    SCOPED_TRACE(dir);
    // dp 4.
    Shard got;
    auto v = load_dp4(w, dir, cfg_, &got);
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_EQ(*v, tensors);
    expect_same(got, whole, "dp 4 ");
    // pp 2 x dp 2: a stage's layers, owning half of its buffer.
    auto grid = Grid::create(w, GridShape{2, 2, 1});
    ASSERT_TRUE(grid.ok());
    const GridCoord at = grid->coord();
    Shard stage = make_shard(cfg_, at.pp, at.pp + 1, {});
    poison(stage);
    ASSERT_TRUE(load_training_checkpoint(dir, cfg_, *stage.store, stage.opt.get()).ok());
    const int64_t n = stage.store->numel();
    v = verify_loaded_fingerprints(
        w, dir, {CheckpointChunk{stage.store.get(), stage.opt.get(), FlatRange{n * at.dp / 2, n * (at.dp + 1) / 2}}});
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_EQ(*v, tensors);  // the two stages together hold every tensor (wte once: the tied copy is not counted)
    // One rank: the whole model alone (here each rank on its own communicator).
    Shard one = make_shard(cfg_, 0, static_cast<int>(cfg_.n_layer), {});
    poison(one);
    ASSERT_TRUE(load_training_checkpoint(dir, cfg_, *one.store, one.opt.get()).ok());
    v = verify_loaded_fingerprints(**self, dir, {CheckpointChunk{one.store.get(), one.opt.get(), {0, one.store->numel()}}});
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_EQ(*v, tensors);
    expect_same(one, whole, "1 rank ");
  }
  // The same logical state saved under two layouts: the same fingerprints, key by key.
  auto ra = checkpoint::read_manifest(a), rz = checkpoint::read_manifest(z);
  ASSERT_TRUE(ra.ok() && rz.ok());
  ASSERT_EQ(ra->tensors.size(), rz->tensors.size());
  for (size_t i = 0; i < ra->tensors.size(); ++i) {
    ASSERT_TRUE(ra->tensors[i].fingerprint.has_value()) << ra->tensors[i].key;
    EXPECT_EQ(ra->tensors[i].fingerprint, rz->tensors[i].fingerprint) << ra->tensors[i].key;
  }
}

// --- planted damage: rank 0 edits a copy of the dp 2 x tp 2 checkpoint (shard bytes and the
// piece's checksum together, coverage kept), then every rank loads it into dp 4.

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}
void write_json(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(1); }
std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}
json& tensor_json(json& m, const std::string& key) {
  for (json& t : m["tensors"])
    if (t["key"] == key) return t;
  throw std::runtime_error("no tensor " + key);
}
fs::path shard_path(const fs::path& dir, const json& piece) { return dir / piece["file"].get<std::string>(); }
// Rewrites `bytes` of a piece in its shard file and the piece's checksum to match.
void rewrite_piece(const fs::path& dir, json& piece, const std::string& bytes) {
  std::string shard = read_bytes(shard_path(dir, piece));
  std::memcpy(shard.data() + piece["offset_in_file"].get<size_t>(), bytes.data(), bytes.size());
  write_bytes(shard_path(dir, piece), shard);
  piece["checksum"] = hex(checkpoint::checksum_bytes(bytes.data(), bytes.size()));
}
std::string piece_bytes(const fs::path& dir, const json& piece) {
  return read_bytes(shard_path(dir, piece)).substr(piece["offset_in_file"].get<size_t>(), piece["numel"].get<size_t>() * 4);
}

enum class Plant { dropped_piece, duplicated_range, zeroed_moment };

void plant(const fs::path& dir, Plant what, const std::string& key) {
  json m = read_json(dir / "manifest.json");
  json& pieces = tensor_json(m, key)["pieces"];
  ASSERT_GE(pieces.size(), 2u) << key;
  json &p0 = pieces[0], &p1 = pieces[1];
  switch (what) {
    case Plant::zeroed_moment: {
      rewrite_piece(dir, p1, std::string(p1["numel"].get<size_t>() * 4, '\0'));
      break;
    }
    case Plant::duplicated_range: {  // p1 starts with a copy of p0's first elements
      std::string b1 = piece_bytes(dir, p1);
      const std::string b0 = piece_bytes(dir, p0);
      std::memcpy(b1.data(), b0.data(), std::min(b0.size(), b1.size()));
      rewrite_piece(dir, p1, b1);
      break;
    }
    case Plant::dropped_piece: {  // p1 dropped; p0 stretched over its range with zeros, in a new blob
      const std::string blob = piece_bytes(dir, p0) + std::string(p1["numel"].get<size_t>() * 4, '\0');
      const fs::path file = shard_path(dir, p0);
      std::string shard = read_bytes(file);
      shard.resize((shard.size() + 63) / 64 * 64, '\0');
      p0["offset_in_file"] = shard.size();
      p0["numel"] = p0["numel"].get<int64_t>() + p1["numel"].get<int64_t>();
      p0["checksum"] = hex(checkpoint::checksum_bytes(blob.data(), blob.size()));
      shard += blob;
      write_bytes(file, shard);
      m["shards"][p0["rank"].get<int>()]["bytes"] = shard.size();
      pieces.erase(1);
      break;
    }
  }
  write_json(dir / "manifest.json", m);
}

TEST_F(CheckpointFingerprints, PlantedDamageWithValidChecksumsIsRefusedNamingTheTensor) {
  Communicator& w = world();
  const std::string a = save_dp2_tp2(w, root_, cfg_);
  const struct {
    Plant what;
    const char* name;
    std::string key;
  } plants[] = {{Plant::dropped_piece, "dropped_piece", "param/h.0.mlp.fc.w"},
                {Plant::duplicated_range, "duplicated_range", "param/h.1.attn.qkv.w"},
                {Plant::zeroed_moment, "zeroed_moment", "adam_v/h.0.mlp.proj.w"}};
  for (const auto& p : plants) {
    SCOPED_TRACE(p.name);
    const std::string dir = root_ + "/" + p.name + "/checkpoints/" + checkpoint::step_dir_name(kStep);
    if (w.rank() == 0) {
      fs::create_directories(fs::path(dir).parent_path());
      fs::copy(a, dir, fs::copy_options::recursive);
      plant(dir, p.what, p.key);
    }
    ASSERT_TRUE(w.barrier().ok());
    auto v = load_dp4(w, dir, cfg_);  // every checksum and the coverage pass: only the fingerprint refuses
    ASSERT_FALSE(v.ok()) << "planted " << p.name << " loaded";
    EXPECT_EQ(v.status().code(), StatusCode::corrupt_data);
    EXPECT_NE(v.status().message().find("'" + p.key + "'"), std::string::npos) << v.status().message();
    EXPECT_NE(v.status().message().find("tessera checkpoint fingerprint"), std::string::npos) << v.status().message();
    // Only that tensor: the others loaded as saved.
    EXPECT_EQ(v.status().message().find("' loads as", v.status().message().find("' loads as") + 1), std::string::npos)
        << v.status().message();
  }
}

TEST_F(CheckpointFingerprints, ConvertedAndBackDiffsEqual) {
  Communicator& w = world();
  const std::string a = save_dp2_tp2(w, root_, cfg_);
  if (w.rank() == 0) {
    auto out = export_consolidated(a, root_ + "/consolidated");
    ASSERT_TRUE(out.ok()) << out.status().message();
    auto back = import_consolidated(root_ + "/consolidated", root_ + "/back");
    ASSERT_TRUE(back.ok()) << back.status().message();
    auto d = checkpoint::diff_checkpoints(a, step_dir(root_ + "/back"));
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->ranks_a, 4);
    EXPECT_EQ(d->ranks_b, 1);
    for (const std::string& s : d->state_differences) ADD_FAILURE() << "state differs: " << s;
    for (const auto& t : d->tensors) {
      EXPECT_EQ(t.kind, checkpoint::TensorDiffKind::equal) << t.key;
      EXPECT_TRUE(t.fingerprint_a && t.fingerprint_a == t.fingerprint_b) << t.key;  // 4 ranks vs 1: the same
    }
    EXPECT_TRUE(d->equal());
    EXPECT_EQ(static_cast<int64_t>(d->tensors.size()), model_tensors(cfg_));
  }
}

}  // namespace
