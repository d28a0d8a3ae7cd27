#include "redis/resp.h"

#include <hiredis/alloc.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "common/cat.h"

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

constexpr size_t kMaxDepth = 7;  // hiredis's own bound on nested arrays
constexpr uint64_t kSaturated = uint64_t{1} << 62;

Status Breach(std::string what) { return Status::Internal("reply from redis: " + what); }

}  // namespace

Status ReplyParser::Framing::Scan(const char* data, size_t len) {
  const char* p = data;
  const char* const end = data + len;
  while (p < end && phase_ != Phase::kStopped) {
    switch (phase_) {
      case Phase::kType:
        type_ = *p++;
        if (std::string_view("+-:$*").find(type_) == std::string_view::npos) {
          phase_ = Phase::kStopped;  // not RESP: hiredis refuses it, naming the byte
          break;
        }
        phase_ = Phase::kLine;
        number_ = 0;
        negative_ = false;
        line_bytes_ = 0;
        break;
      case Phase::kLine: {
        const auto* nl =
            static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
        const char* const stop = nl != nullptr ? nl + 1 : end;
        line_bytes_ += static_cast<size_t>(stop - p);
        if (line_bytes_ > limits_.max_bulk_bytes + 2) {
          return Breach(Cat("a line of more than ", limits_.max_bulk_bytes, " bytes"));
        }
        if (type_ == '$' || type_ == '*') {
          for (const char* q = p; q < stop; ++q) {
            if (*q >= '0' && *q <= '9') {
              const auto digit = static_cast<uint64_t>(*q - '0');
              number_ = number_ >= kSaturated / 10 ? kSaturated : number_ * 10 + digit;
            } else if (*q == '-' && q == p && line_bytes_ == static_cast<size_t>(stop - p)) {
              negative_ = true;
            } else if (*q != '\r' && *q != '\n') {
              phase_ = Phase::kStopped;  // not a length: hiredis refuses it
            }
          }
        }
        p = stop;
        if (nl != nullptr && phase_ == Phase::kLine) {
          if (Status s = EndLine(); !s.ok()) return s;
        }
        break;
      }
      case Phase::kPayload: {
        const uint64_t skip = std::min<uint64_t>(payload_left_, static_cast<uint64_t>(end - p));
        p += skip;
        payload_left_ -= skip;
        if (payload_left_ == 0) EndItem();
        break;
      }
      case Phase::kStopped:
        break;
    }
  }
  return Status::Ok();
}

Status ReplyParser::Framing::EndLine() {
  if (type_ == '$' && !negative_) {
    if (number_ > limits_.max_bulk_bytes) {
      return Breach(
          Cat("a bulk string of ", number_, " bytes, more than ", limits_.max_bulk_bytes));
    }
    payload_left_ = number_ + 2;  // and its CRLF
    phase_ = Phase::kPayload;
    return Status::Ok();
  }
  if (type_ == '*' && !negative_ && number_ > 0) {
    const auto max = static_cast<uint64_t>(limits_.max_elements);
    if (number_ > max) return Breach(Cat("an array of ", number_, " elements, more than ", max));
    reply_elements_ += number_;
    if (reply_elements_ > max) return Breach(Cat("more than ", max, " elements in one reply"));
    if (open_.size() >= kMaxDepth) {
      phase_ = Phase::kStopped;  // hiredis refuses the nesting
      return Status::Ok();
    }
    open_.push_back(number_);
    phase_ = Phase::kType;
    return Status::Ok();
  }
  EndItem();  // a status, an error, an integer, a nil or an empty array
  return Status::Ok();
}

void ReplyParser::Framing::EndItem() {
  phase_ = Phase::kType;
  // The item completes its array's count; a completed array is an item of its parent.
  while (!open_.empty()) {
    if (--open_.back() > 0) return;
    open_.pop_back();
  }
  reply_elements_ = 0;  // the reply is whole
}

ReplyParser::ReplyParser(ReplyLimits limits)
    : limits_(limits), framing_(limits), reader_(redisReaderCreate()) {
  assert(reader_ != nullptr);
}

ReplyParser::~ReplyParser() { redisReaderFree(reader_); }

void ReplyParser::Feed(const char* data, size_t len) {
  if (!failed_.ok()) return;
  failed_ = framing_.Scan(data, len);
  if (failed_.ok()) redisReaderFeed(reader_, data, len);
}

size_t ReplyParser::buffered() const { return reader_->len - reader_->pos; }

Result<std::optional<Reply>> ReplyParser::Next() {
  if (!failed_.ok()) return failed_;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    return Status::Internal(std::string("malformed reply from redis: ") + reader_->errstr);
  }
  if (raw != nullptr) return std::optional<Reply>(Reply(static_cast<redisReply*>(raw)));
  if (buffered() > limits_.max_pending_bytes) {
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

Reply ArrayOf(std::vector<Reply> elements) {
  // Allocated as hiredis allocates its own replies, so freeReplyObject frees it and them.
  auto* r = static_cast<redisReply*>(hi_calloc(1, sizeof(redisReply)));
  r->type = REDIS_REPLY_ARRAY;
  r->elements = elements.size();
  if (!elements.empty()) {
    r->element = static_cast<redisReply**>(hi_calloc(elements.size(), sizeof(redisReply*)));
    for (size_t i = 0; i < elements.size(); ++i) r->element[i] = elements[i].release();
  }
  return Reply(r);
}

}  // namespace caudal::redis
