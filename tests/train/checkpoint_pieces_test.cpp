// checkpoint_pieces: what each rank of a dp x pp x tp grid writes covers every tensor of the model
// exactly once (checked with the manifest's own merge), and the manifest a gpt2 checkpoint at tp 2
// needs (one piece per row of each row-split matrix) stays a reasonable size.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/format.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "train/train_checkpoint.h"

using namespace tessera;

namespace {

// The record rank r would write of `layout`'s `owned` range (parameters, and the moments, which have
// the same pieces, when asked), without any data: pieces get fake but consistent file offsets.
checkpoint::ShardRecord record_of(int r, const ParamLayout& layout, FlatRange owned, bool with_moments = false) {
  checkpoint::ShardRecord rec{r, checkpoint::shard_file_name(r), 0, {}};
  for (const char* prefix : {"param/", "adam_m/", "adam_v/"}) {
    if (!with_moments && std::string(prefix) != "param/") continue;
    for (const SavedPiece& p : checkpoint_pieces(layout, owned)) {
      checkpoint::TensorEntry e{prefix + p.param->name, DType::f32, p.param->global_shape, {}};
      if (p.numel > 0) {
        e.pieces.push_back({r, rec.file, rec.bytes, p.global_offset, p.numel, 0x0123456789abcdefull});
        rec.bytes += (p.numel * 4 + 63) / 64 * 64;
      }
      rec.entries.push_back(std::move(e));
    }
  }
  return rec;
}

// The records every rank of a dp x pp x tp grid would write.
std::vector<checkpoint::ShardRecord> records_for(const ModelConfig& cfg, int dp, int pp, int tp,
                                                 bool with_moments = false) {
  std::vector<checkpoint::ShardRecord> out;
  const int L = static_cast<int>(cfg.n_layer);
  for (int r = 0; r < dp * pp * tp; ++r) {
    const int t = r % tp, s = (r / tp) % pp, d = r / (tp * pp);
    ParamLayout layout(cfg, s * L / pp, (s + 1) * L / pp, TensorParallelShard{t, tp});
    const int64_t n = layout.total_numel();
    out.push_back(record_of(r, layout, FlatRange{n * d / dp, n * (d + 1) / dp}, with_moments));
  }
  return out;
}

Result<std::vector<checkpoint::TensorEntry>> merged(const std::vector<checkpoint::ShardRecord>& records) {
  std::vector<checkpoint::TensorEntry> all;
  for (const auto& r : records) all.insert(all.end(), r.entries.begin(), r.entries.end());
  return checkpoint::merge_entries(all);
}

// The merged records hold exactly the whole model's tensors, by name and global shape, each covered
// element for element.
void expect_whole_model(const std::vector<checkpoint::ShardRecord>& records, const ModelConfig& cfg) {
  auto m = merged(records);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ParamLayout whole(cfg);
  ASSERT_EQ(m->size(), whole.params().size());
  for (const auto& e : *m) {
    const ParamInfo* p = whole.find(e.key.substr(6));
    ASSERT_NE(p, nullptr) << e.key;
    EXPECT_EQ(e.global_shape, p->global_shape) << e.key;
    int64_t covered = 0;
    for (const auto& piece : e.pieces) covered += piece.numel;
    EXPECT_EQ(covered, p->numel) << e.key;
  }
}

ModelConfig small(bool llama, bool tied, int64_t V) {
  ModelConfig cfg = model_preset(llama ? "tiny-llama" : "tiny").value();
  cfg.n_layer = 4;
  cfg.vocab_size = V;
  cfg.tied_embeddings = tied;
  return cfg;
}

TEST(CheckpointPieces, EveryGridCoversEveryTensorOnce) {
  struct Grid3 {
    int dp, pp, tp;
  };
  for (bool llama : {false, true})
    for (bool tied : {false, true})
      for (int64_t V : {255, 256})
        for (Grid3 g : {Grid3{1, 1, 1}, Grid3{3, 1, 1}, Grid3{1, 1, 2}, Grid3{1, 2, 2}, Grid3{2, 2, 2}, Grid3{1, 4, 1},
                        Grid3{3, 1, 2}, Grid3{1, 2, 1}}) {
          const ModelConfig cfg = small(llama, tied, V);
          SCOPED_TRACE(std::string(llama ? "llama" : "gpt2") + (tied ? " tied" : " untied") + " V " +
                       std::to_string(V) + " dp " + std::to_string(g.dp) + " pp " + std::to_string(g.pp) + " tp " +
                       std::to_string(g.tp));
          expect_whole_model(records_for(cfg, g.dp, g.pp, g.tp), cfg);
        }
}

TEST(CheckpointPieces, SkipsReplicatedOnOtherTpRanksAndTheTiedCopy) {
  const ModelConfig cfg = small(false, true, 255);
  ParamLayout last_tp1(cfg, 2, 4, TensorParallelShard{1, 2});
  ASSERT_NE(last_tp1.find("wte"), nullptr);  // the head's copy
  std::map<std::string, int> n;
  for (const SavedPiece& p : checkpoint_pieces(last_tp1, FlatRange{0, last_tp1.total_numel()})) ++n[p.param->name];
  EXPECT_EQ(n.count("wte"), 0u);
  EXPECT_EQ(n.count("lnf.w"), 0u);         // replicated: tp rank 0 writes it
  EXPECT_EQ(n.count("h.2.ln1.w"), 0u);
  EXPECT_EQ(n["h.2.attn.proj.w"], 64);     // row split: one piece per row (C = 64)
  EXPECT_EQ(n["h.2.attn.qkv.w"], 3);       // column split: q, k, v blocks
  // A range that owns nothing of a tensor still names it (numel 0).
  ParamLayout first(cfg, 0, 2, TensorParallelShard{0, 2});
  const auto pieces = checkpoint_pieces(first, FlatRange{0, 0});
  ASSERT_EQ(pieces.size(), first.params().size());
  for (const SavedPiece& p : pieces) EXPECT_EQ(p.numel, 0) << p.param->name;
}

// Owner-only expert storage (dp x ep, no ZeRO): the ep ranks of a dp group hold different experts
// and the same dense tensors; each dp group splits its ranks' buffers (DataParallel's
// checkpoint_range) and only ep rank 0 writes the dense tensors. Every element is written once.
TEST(CheckpointPieces, ShardedExpertsCoverEveryTensorOnce) {
  ModelConfig cfg = model_preset("tiny-moe").value();
  cfg.moe_shared_expert = true;
  for (int dp : {1, 2, 3})
    for (int ep : {2, 4}) {
      SCOPED_TRACE("dp " + std::to_string(dp) + " ep " + std::to_string(ep));
      std::vector<checkpoint::ShardRecord> records;
      for (int r = 0; r < dp * ep; ++r) {
        const int e = r % ep, d = r / ep;
        ParamLayout layout(cfg, 0, static_cast<int>(cfg.n_layer), {}, 16, ExpertShard{e, ep});
        const int64_t n = layout.total_numel();
        records.push_back(record_of(r, layout, FlatRange{n * d / dp, n * (d + 1) / dp}));
        for (const auto& en : records.back().entries)
          if (e != 0)
            EXPECT_TRUE(layout.get(en.key.substr(6)).expert) << en.key << " written by ep rank " << e;
      }
      expect_whole_model(records, cfg);
    }
}

// gpt2 (C 768, 12 layers) at tp 2: attn.proj.w and mlp.proj.w are split by columns, so every row
// is its own piece (768 per tensor per rank, x 3 for param/adam_m/adam_v). Measure the manifest.
TEST(CheckpointPieces, Gpt2ManifestSizeAtTp2) {
  const ModelConfig cfg = model_preset("gpt2").value();
  for (int tp : {1, 2}) {
    auto records = records_for(cfg, 1, 1, tp, /*with_moments=*/true);
    auto m = merged(records);
    ASSERT_TRUE(m.ok()) << m.status().message();
    checkpoint::Manifest man;
    man.world_size = tp;
    for (const auto& r : records) man.shards.push_back({r.rank, r.file, r.bytes, {}});
    man.tensors = *m;
    int64_t pieces = 0;
    for (const auto& e : man.tensors) pieces += static_cast<int64_t>(e.pieces.size());
    const std::string text = checkpoint::manifest_to_json(man).dump(1) + "\n";
    const size_t bytes = text.size();
    // What opening the checkpoint costs: parsing and validating the manifest.
    const auto t0 = std::chrono::steady_clock::now();
    auto back = checkpoint::manifest_from_json(nlohmann::json::parse(text), "manifest.json");
    const double parse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(back.ok()) << back.status().message();
    std::printf("gpt2 tp %d: %lld pieces, manifest %.2f MB, parsed and validated in %.2f s\n", tp,
                static_cast<long long>(pieces), bytes / 1e6, parse_s);
    if (tp == 2) {
      // Per key prefix: wte 2 (one per rank), wpe 1, lnf 2; per layer 6 replicated, qkv.w/.b 3 blocks x 2
      // ranks each, fc.w/.b 2 each, attn.proj.w and mlp.proj.w 768 rows x 2 ranks each.
      EXPECT_EQ(pieces, 3 * (2 + 1 + 2 + 12 * (6 + 12 + 4 + 2 * 768 * 2)));
      EXPECT_LT(bytes, 32u << 20);
    }
  }
}

}  // namespace
