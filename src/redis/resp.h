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

// Turns a byte stream into replies.
class ReplyParser {
 public:
  ReplyParser();
  ~ReplyParser();
  ReplyParser(const ReplyParser&) = delete;
  ReplyParser& operator=(const ReplyParser&) = delete;

  void Feed(const char* data, size_t len);
  // The next complete reply, nullopt when more bytes are needed, or kInternal when the stream
  // is not RESP (the connection must then be dropped).
  Result<std::optional<Reply>> Next();

 private:
  redisReader* reader_;
};

// Reply inspection helpers.
bool IsError(const redisReply& r);
// Status/string/error text; empty for other types.
std::string_view Text(const redisReply& r);
// An array of integers into `out` (replacing its contents); false for anything else.
bool ToIntegers(const redisReply& r, std::vector<int64_t>& out);

}  // namespace caudal::redis
