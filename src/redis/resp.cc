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

namespace {

// hiredis's own reply constructors (static in hiredis.c, reachable through a reader's table).
const redisReplyObjectFunctions& DefaultFunctions() {
  static const redisReplyObjectFunctions* const fns = [] {
    redisReader* r = redisReaderCreate();
    assert(r != nullptr);
    const redisReplyObjectFunctions* f = r->fn;
    redisReaderFree(r);
    return f;
  }();
  return *fns;
}

// hiredis's createArray, unless the array is longer than the parser's limit: then nothing is
// allocated, and the reader fails the stream (as out of memory; Next() says why).
void* CreateBoundedArray(const redisReadTask* task, int elements) {
  auto* bound = static_cast<ReplyParser::ArrayBound*>(task->privdata);
  if (elements > bound->max_elements) {
    bound->refused = elements;
    return nullptr;
  }
  return DefaultFunctions().createArray(task, elements);
}

redisReplyObjectFunctions* BoundedFunctions() {
  static redisReplyObjectFunctions fns = [] {
    redisReplyObjectFunctions f = DefaultFunctions();
    f.createArray = CreateBoundedArray;
    return f;
  }();
  return &fns;
}

}  // namespace

ReplyParser::ReplyParser(ReplyLimits limits)
    : limits_(limits),
      bound_{.max_elements = limits.max_elements},
      reader_(redisReaderCreateWithFunctions(BoundedFunctions())) {
  assert(reader_ != nullptr);
  reader_->privdata = &bound_;
}

ReplyParser::~ReplyParser() { redisReaderFree(reader_); }

void ReplyParser::Feed(const char* data, size_t len) { redisReaderFeed(reader_, data, len); }

Result<std::optional<Reply>> ReplyParser::Next() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    if (bound_.refused > 0) {
      return Status::Internal("reply from redis: an array of " + std::to_string(bound_.refused) +
                              " elements, more than " + std::to_string(limits_.max_elements));
    }
    return Status::Internal(std::string("malformed reply from redis: ") + reader_->errstr);
  }
  if (raw != nullptr) return std::optional<Reply>(Reply(static_cast<redisReply*>(raw)));
  if (reader_->len - reader_->pos > limits_.max_pending_bytes) {
    return Status::Internal("reply from redis: larger than " +
                            std::to_string(limits_.max_pending_bytes) + " bytes");
  }
  return std::optional<Reply>();
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
