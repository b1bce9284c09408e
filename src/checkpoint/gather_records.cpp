// all_gather_records: every rank's shard record (or failure) on every rank.
#include "checkpoint/gather_records.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera::checkpoint {

Result<std::vector<ShardRecord>> all_gather_records(Communicator& comm, const Status& local, const ShardRecord& record) {
  const int n = comm.size();
  const std::string text = local.ok() ? shard_record_to_json(record).dump() : local.message();
  const int64_t mine[2] = {local.ok() ? 1 : 0, static_cast<int64_t>(text.size())};
  std::vector<int64_t> heads(2 * static_cast<size_t>(n));
  TS_RETURN_IF_ERROR(comm.all_gather(mine, heads.data(), sizeof mine, DType::u8));  // no i64 dtype: move bytes
  int64_t width = 1;
  for (int r = 0; r < n; ++r) width = std::max(width, heads[2 * r + 1]);
  std::vector<char> padded(static_cast<size_t>(width), 0), all(static_cast<size_t>(width) * n);
  std::copy(text.begin(), text.end(), padded.begin());
  TS_RETURN_IF_ERROR(comm.all_gather(padded.data(), all.data(), width, DType::u8));

  std::string failed, first_message;
  std::vector<ShardRecord> records;
  for (int r = 0; r < n; ++r) {
    const std::string piece(all.data() + static_cast<size_t>(r) * width, static_cast<size_t>(heads[2 * r + 1]));
    if (heads[2 * r] == 0) {
      failed += (failed.empty() ? "" : ", ") + std::to_string(r);
      if (first_message.empty()) first_message = piece;
      continue;
    }
    auto parsed = nlohmann::json::parse(piece, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return internal_error("checkpoint: rank " + std::to_string(r) + " sent an unreadable shard record");
    TS_ASSIGN_OR_RETURN(ShardRecord rec, shard_record_from_json(parsed));
    records.push_back(std::move(rec));
  }
  if (!local.ok()) return local;
  if (!failed.empty())
    return io_error("checkpoint not saved: writing the shard failed on rank(s) " + failed + " of " + comm.name() +
                    " (first error: " + first_message + ")");
  return records;
}

}  // namespace tessera::checkpoint
