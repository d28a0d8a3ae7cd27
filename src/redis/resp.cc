#include "redis/resp.h"

#include <hiredis/hiredis.h>

#include <cassert>
#include <vector>

namespace caudal::redis {

void ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

void AppendCommand(std::span<const std::string_view> argv, std::string& out) {
  std::vector<const char*> ptrs(argv.size());
  std::vector<size_t> lens(argv.size());
  for (size_t i = 0; i < argv.size(); ++i) {
    ptrs[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  char* cmd = nullptr;
  const int n =
      redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  assert(n >= 0 && "redisFormatCommandArgv failed (out of memory)");
  if (n > 0) out.append(cmd, static_cast<size_t>(n));
  redisFreeCommand(cmd);
}

ReplyParser::ReplyParser() : reader_(redisReaderCreate()) { assert(reader_ != nullptr); }

ReplyParser::~ReplyParser() { redisReaderFree(reader_); }

void ReplyParser::Feed(const char* data, size_t len) { redisReaderFeed(reader_, data, len); }

Result<std::optional<Reply>> ReplyParser::Next() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    return Status::Internal(std::string("malformed reply from redis: ") + reader_->errstr);
  }
  if (raw == nullptr) return std::optional<Reply>();
  return std::optional<Reply>(Reply(static_cast<redisReply*>(raw)));
}

bool IsError(const redisReply& r) { return r.type == REDIS_REPLY_ERROR; }

std::string_view Text(const redisReply& r) {
  if (r.type == REDIS_REPLY_STATUS || r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_ERROR) {
    return {r.str, r.len};
  }
  return {};
}

}  // namespace caudal::redis

namespace caudal::redis {

bool ToIntegers(const redisReply& r, std::vector<int64_t>& out) {
  if (r.type != REDIS_REPLY_ARRAY) return false;
  out.resize(r.elements);
  for (size_t i = 0; i < r.elements; ++i) {
    if (r.element[i]->type != REDIS_REPLY_INTEGER) return false;
    out[i] = r.element[i]->integer;
  }
  return true;
}

}  // namespace caudal::redis
