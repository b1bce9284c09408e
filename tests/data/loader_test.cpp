// DataLoader and EvalLoader: window alignment, targets, epoch coverage, determinism, rank slicing
// equivalence, exact resume, prefetch shutdown, and errors. Shards hold consecutive ids so every
// token says where it came from.
#include "data/loader.h"

#include <gtest/gtest.h>

#include <set>

#include "data/prepare.h"
#include "data/token_shard.h"
#include "data_test_util.h"

namespace tessera {
namespace {

using testing::TempDir;

constexpr uint32_t kShardBase = 100000;  // shard s holds kShardBase*s + 0, 1, 2, ...

// Shards of the given sizes (u32 ids, since the values exceed 65535).
std::vector<std::string> make_shards(const TempDir& d, const std::vector<uint32_t>& sizes) {
  std::vector<std::string> paths;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint32_t> t(sizes[s]);
    for (uint32_t i = 0; i < sizes[s]; ++i) t[i] = kShardBase * static_cast<uint32_t>(s) + i;
    paths.push_back(d / ("train_" + std::to_string(s) + ".bin"));
    EXPECT_TRUE(write_token_shard(paths.back(), t, kShardVersionU32).ok());
  }
  return paths;
}

struct Batch {
  std::vector<int32_t> in, tgt;
  bool operator==(const Batch&) const = default;
};

Batch next(DataLoader& l) {
  Batch b;
  b.in.resize(static_cast<size_t>(l.config().B) * l.config().T);
  b.tgt.resize(b.in.size());
  l.next_batch(b.in.data(), b.tgt.data());
  return b;
}

std::vector<Batch> take(DataLoader& l, int n) {
  std::vector<Batch> v;
  for (int i = 0; i < n; ++i) v.push_back(next(l));
  return v;
}

std::unique_ptr<DataLoader> open(const std::vector<std::string>& shards, LoaderConfig c) {
  auto r = DataLoader::open_shards(shards, c);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

// Shard sizes 1000, 37, 501 with T = 16: 62 + 2 + 31 = 95 windows.
const std::vector<uint32_t> kSizes = {1000, 37, 501};

TEST(DataLoader, WindowsAlignedAndTargetsShifted) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  auto l = open(shards, {.B = 3, .T = 16, .seed = 1});
  EXPECT_EQ(l->windows_per_epoch(), 95u);
  EXPECT_EQ(l->tokens(), 1538u);
  for (int step = 0; step < 40; ++step) {
    Batch b = next(*l);
    for (int r = 0; r < 3; ++r) {
      const int32_t* in = &b.in[r * 16];
      const int32_t* tg = &b.tgt[r * 16];
      const int32_t shard = in[0] / kShardBase, off = in[0] % kShardBase;
      EXPECT_EQ(off % 16, 0) << "window starts on a stride-T boundary";
      EXPECT_LE(static_cast<uint32_t>(off + 17), kSizes[shard]) << "window of T+1 tokens inside its shard";
      for (int t = 0; t < 16; ++t) {
        EXPECT_EQ(in[t], in[0] + t);
        EXPECT_EQ(tg[t], in[t] + 1);
      }
    }
  }
}

TEST(DataLoader, EachEpochVisitsEveryWindowOnce) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  auto l = open(shards, {.B = 5, .T = 16, .seed = 9});
  // 19 batches of 5 = 95 = exactly one epoch.
  std::vector<int32_t> first_epoch;
  std::set<int32_t> starts;
  for (const Batch& b : take(*l, 19))
    for (int r = 0; r < 5; ++r) {
      starts.insert(b.in[r * 16]);
      first_epoch.push_back(b.in[r * 16]);
    }
  EXPECT_EQ(starts.size(), 95u);
  EXPECT_EQ(l->position(), (LoaderPosition{1, 0}));
  std::vector<int32_t> second_epoch;
  for (const Batch& b : take(*l, 19))
    for (int r = 0; r < 5; ++r) second_epoch.push_back(b.in[r * 16]);
  EXPECT_NE(first_epoch, second_epoch) << "each epoch has its own order";
  EXPECT_EQ(std::set<int32_t>(second_epoch.begin(), second_epoch.end()), starts);
  // Shuffled, not shard order.
  std::vector<int32_t> sorted = first_epoch;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(first_epoch, sorted);
}

TEST(DataLoader, SameSeedSameBatchesDifferentSeedDifferent) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  auto a = open(shards, {.B = 4, .T = 16, .seed = 42});
  auto b = open(shards, {.B = 4, .T = 16, .seed = 42, .prefetch_depth = 0});
  auto c = open(shards, {.B = 4, .T = 16, .seed = 43});
  auto ba = take(*a, 60), bb = take(*b, 60), bc = take(*c, 60);  // crosses two epoch ends
  EXPECT_EQ(ba, bb);
  EXPECT_NE(ba, bc);
  EXPECT_EQ(a->position(), b->position());
  EXPECT_EQ(a->position(), (LoaderPosition{240 / 95, 240 % 95}));
}

TEST(DataLoader, RankSlicesUnionEqualsSingleRankStream) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  const int world = 3, B = 2;
  auto whole = open(shards, {.B = B * world, .T = 16, .seed = 5});
  std::vector<std::unique_ptr<DataLoader>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(open(shards, {.B = B, .T = 16, .seed = 5, .rank = r, .world = world}));
  for (int step = 0; step < 50; ++step) {  // 300 sequences: crosses epoch ends mid-batch (95 per epoch)
    Batch g = next(*whole);
    Batch u;
    for (auto& l : ranks) {
      Batch p = next(*l);
      u.in.insert(u.in.end(), p.in.begin(), p.in.end());
      u.tgt.insert(u.tgt.end(), p.tgt.begin(), p.tgt.end());
    }
    ASSERT_EQ(u, g) << "step " << step;
    for (auto& l : ranks) ASSERT_EQ(l->position(), whole->position());
  }
}

TEST(DataLoader, ResumeReproducesTheFollowingBatches) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  LoaderConfig c{.B = 4, .T = 16, .seed = 77, .rank = 1, .world = 2};
  auto l = open(shards, c);
  take(*l, 30);  // past the first epoch end
  const LoaderPosition saved = l->position();
  EXPECT_EQ(saved, (LoaderPosition{240 / 95, 240 % 95}));
  auto a = take(*l, 25);

  auto fresh = open(shards, c);
  take(*fresh, 3);  // a restored loader may have consumed and prefetched anything before
  ASSERT_TRUE(fresh->restore(saved).ok());
  EXPECT_EQ(fresh->position(), saved);
  EXPECT_EQ(take(*fresh, 25), a);

  // Restoring the same loader discards its prefetched batches.
  ASSERT_TRUE(l->restore(saved).ok());
  EXPECT_EQ(take(*l, 25), a);

  LoaderConfig sync = c;
  sync.prefetch_depth = 0;
  auto s = open(shards, sync);
  ASSERT_TRUE(s->restore(saved).ok());
  EXPECT_EQ(take(*s, 25), a);

  Status bad = s->restore({0, 95});
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.message().find("95 windows"), std::string::npos) << bad.message();
}

TEST(DataLoader, PrefetchThreadShutsDownCleanly) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  for (int i = 0; i < 20; ++i) {
    // Destroyed with the queue full (producer blocked) and right after start (producer busy).
    auto l = open(shards, {.B = 2, .T = 16, .seed = static_cast<uint64_t>(i), .prefetch_depth = 1 + i % 3});
    if (i % 2) take(*l, 2);
  }
  auto l = open(shards, {.B = 2, .T = 16});
  take(*l, 5);
  EXPECT_GE(l->wait_seconds(), 0.0);
  EXPECT_LT(l->wait_seconds(), 5.0);
  l.reset();  // joins; a hang here fails the test by timeout
  SUCCEED();
}

TEST(DataLoader, Errors) {
  TempDir d;
  auto shards = make_shards(d, {10, 16});
  auto r = DataLoader::open_shards(shards, {.B = 1, .T = 16});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fewer than one window of T+1 = 17"), std::string::npos) << r.status().message();
  EXPECT_TRUE(DataLoader::open_shards(shards, {.B = 1, .T = 15}).ok());  // the 16-token shard holds one window

  auto none = DataLoader::open_shards({}, {.B = 1, .T = 4});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no shards"), std::string::npos);
  EXPECT_FALSE(DataLoader::open_shards(shards, {.B = 1, .T = 4, .rank = 2, .world = 2}).ok());
  EXPECT_FALSE(DataLoader::open_shards(shards, {.B = 0, .T = 4}).ok());
  auto missing = DataLoader::open_shards({d / "nope.bin"}, {.B = 1, .T = 4});
  EXPECT_EQ(missing.status().code(), StatusCode::not_found);
}

// Context parallelism: the chunks of each sequence, put back where they came from, are the whole
// sequence (inputs and targets), batch after batch, for training and evaluation alike: contiguous
// chunks (Ulysses) and balanced two-piece chunks (ring attention).
TEST(Loaders, SequenceChunksTileEachSequence) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  const int B = 3, T = 16, chunks = 4, n = T / chunks, h = n / 2;
  for (bool balanced : {false, true}) {
    // Where element i of rank c's (B, n) batch sits in the whole (B, T) batch.
    auto whole_index = [&](int c, int i) {
      if (!balanced) return (i / n) * T + c * n + i % n;
      const int piece = i / (B * h), b = (i % (B * h)) / h, t = i % h;
      return b * T + (piece == 0 ? c : 2 * chunks - 1 - c) * h + t;
    };
    auto whole = open(shards, {.B = B, .T = T, .seed = 7});
    std::vector<std::unique_ptr<DataLoader>> parts;
    std::vector<EvalLoader> eval_parts;
    for (int c = 0; c < chunks; ++c) {
      const SequenceChunk chunk{c, chunks, balanced};
      parts.push_back(open(shards, {.B = B, .T = T, .chunk = chunk, .seed = 7}));
      auto e = EvalLoader::open_shards(shards, B, T, 0, 1, chunk);
      ASSERT_TRUE(e.ok()) << e.status().to_string();
      eval_parts.push_back(std::move(e).value());
    }
    auto eval_whole = EvalLoader::open_shards(shards, B, T);
    ASSERT_TRUE(eval_whole.ok());
    std::vector<int32_t> in(B * n), tg(B * n), ein(B * T), etg(B * T);
    for (int step = 0; step < 40; ++step) {
      const Batch g = next(*whole);
      const bool eval_more = eval_whole->next_batch(ein.data(), etg.data());
      for (int c = 0; c < chunks; ++c) {
        parts[c]->next_batch(in.data(), tg.data());
        for (int i = 0; i < B * n; ++i) {
          ASSERT_EQ(in[i], g.in[whole_index(c, i)]) << "step " << step << " chunk " << c << " balanced " << balanced;
          ASSERT_EQ(tg[i], g.tgt[whole_index(c, i)]) << "step " << step << " chunk " << c << " balanced " << balanced;
        }
        ASSERT_EQ(parts[c]->position(), whole->position());
        ASSERT_EQ(eval_parts[c].next_batch(in.data(), tg.data()), eval_more);
        if (!eval_more) continue;
        for (int i = 0; i < B * n; ++i) {
          ASSERT_EQ(in[i], ein[whole_index(c, i)]) << "eval batch " << step << " chunk " << c << " balanced " << balanced;
          ASSERT_EQ(tg[i], etg[whole_index(c, i)]) << "eval batch " << step << " chunk " << c << " balanced " << balanced;
        }
      }
    }
  }
  auto bad = DataLoader::open_shards(shards, {.B = B, .T = 18, .chunk = {0, 4}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be a multiple of 4"), std::string::npos) << bad.status().message();
  auto bad_balanced = DataLoader::open_shards(shards, {.B = B, .T = 12, .chunk = {0, 4, true}});
  ASSERT_FALSE(bad_balanced.ok());
  EXPECT_NE(bad_balanced.status().message().find("must be a multiple of 8"), std::string::npos)
      << bad_balanced.status().message();
}

TEST(EvalLoader, SequentialResettableAndSliced) {
  TempDir d;
  auto shards = make_shards(d, kSizes);
  auto e = EvalLoader::open_shards(shards, 4, 16);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->num_batches(), 95u / 4);
  std::vector<int32_t> in(64), tg(64), starts;
  int n = 0;
  while (e->next_batch(in.data(), tg.data())) {
    ++n;
    for (int r = 0; r < 4; ++r) {
      starts.push_back(in[r * 16]);
      for (int t = 0; t < 16; ++t) EXPECT_EQ(tg[r * 16 + t], in[r * 16 + t] + 1);
    }
  }
  EXPECT_EQ(n, 23);
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end())) << "shard order, then position";
  EXPECT_EQ(starts.front(), 0);
  EXPECT_EQ(starts[62], static_cast<int32_t>(kShardBase));  // shard 1 follows shard 0's 62 windows
  e->reset();
  ASSERT_TRUE(e->next_batch(in.data(), tg.data()));
  EXPECT_EQ(in[0], 0);

  // Two ranks with B=2 see the same windows as one rank with B=4.
  auto r0 = EvalLoader::open_shards(shards, 2, 16, 0, 2);
  auto r1 = EvalLoader::open_shards(shards, 2, 16, 1, 2);
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r0->num_batches(), 23u);
  // Batch k of the union is rank 0's rows then rank 1's rows: the single-rank B=4 order.
  std::vector<int32_t> a(32), b(32), dummy(32), sliced;
  while (r0->next_batch(a.data(), dummy.data()) && r1->next_batch(b.data(), dummy.data())) {
    for (int r = 0; r < 2; ++r) sliced.push_back(a[r * 16]);
    for (int r = 0; r < 2; ++r) sliced.push_back(b[r * 16]);
  }
  EXPECT_EQ(sliced, starts);
}

TEST(Loaders, OverAPreparedDataset) {
  TempDir d;
  testing::write_file(d / "c.txt", testing::generated_corpus(40000));
  PrepareOptions o;
  o.inputs = {d / "c.txt"};
  o.output_dir = d / "ds";
  o.val_fraction = 0.1;
  o.shard_tokens = 8000;
  auto m = prepare_dataset(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto train = DataLoader::open(*m, "train", {.B = 2, .T = 32});
  ASSERT_TRUE(train.ok()) << train.status().to_string();
  EXPECT_EQ((*train)->tokens(), m->train_tokens);
  Batch b = next(**train);
  for (int32_t t : b.in) EXPECT_LT(t, 256);
  auto val = EvalLoader::open(*m, "val", 2, 32);
  ASSERT_TRUE(val.ok()) << val.status().to_string();
  EXPECT_GT(val->num_batches(), 0u);

  o.output_dir = d / "noval";
  o.val_fraction = 0;
  auto m2 = prepare_dataset(o);
  ASSERT_TRUE(m2.ok());
  auto nv = EvalLoader::open(*m2, "val", 2, 32);
  ASSERT_FALSE(nv.ok());
  EXPECT_NE(nv.status().message().find("val split of"), std::string::npos) << nv.status().message();
  EXPECT_NE(nv.status().message().find("no shards"), std::string::npos);
}

}  // namespace
}  // namespace tessera
