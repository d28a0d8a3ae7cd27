// RESP encoding and decoding through hiredis's pure parts (redisFormatCommandArgv and
// redisReader); no I/O happens here, the store's Asio code moves the bytes.
//
// Thread-safety: FormatCommand is reentrant; a ReplyParser belongs to one connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/status.h"

struct redisReply;
struct redisReader;

namespace caudal::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Appends the RESP encoding of `argv` to `out`.
void AppendCommand(std::span<const std::string_view> argv, std::string& out);

// Bounds on one reply, which comes from the network: hiredis allocates a pointer per element an
// array header declares before any element arrives, and buffers a bulk string until it is whole.
// The defaults are far above the store's largest reply (a batch of 128 requests of 64 entries is
// 32,896 integers, about 400 KB).
struct ReplyLimits {
  int max_elements = 1 << 20;                   // per array
  size_t max_pending_bytes = size_t{64} << 20;  // received but not yet a whole reply
};

// Turns a byte stream into replies.
class ReplyParser {
 public:
  explicit ReplyParser(ReplyLimits limits = {});
  ~ReplyParser();
  ReplyParser(const ReplyParser&) = delete;
  ReplyParser& operator=(const ReplyParser&) = delete;

  void Feed(const char* data, size_t len);
  // The next complete reply, nullopt when more bytes are needed, or kInternal when the stream
  // is not RESP or breaks a limit (the connection must then be dropped).
  Result<std::optional<Reply>> Next();

  // What the reader's array constructor sees (through its privdata): the limit, and the length
  // of an array it refused.
  struct ArrayBound {
    int max_elements = 0;
    int64_t refused = 0;
  };

 private:
  ReplyLimits limits_;
  ArrayBound bound_;
  redisReader* reader_;
};

// Reply inspection helpers.
bool IsError(const redisReply& r);
// Status/string/error text; empty for other types.
std::string_view Text(const redisReply& r);
// An array of integers into `out` (replacing its contents); false for anything else.
bool ToIntegers(const redisReply& r, std::vector<int64_t>& out);

}  // namespace caudal::redis
