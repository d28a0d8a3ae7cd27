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

#include "caudal/common/status.h"

struct redisReply;
struct redisReader;

namespace caudal::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Appends the RESP encoding of `argv` to `out`.
void AppendCommand(std::span<const std::string_view> argv, std::string& out);

// Bounds on one reply, which comes from the network. Each is checked as the bytes arrive, at the
// header that declares a size (an array's element count, a bulk string's length), before hiredis
// allocates or buffers anything for it: hiredis would allocate a pointer per element an array
// header declares, and buffer a bulk string until it is whole. The defaults are far above the
// store's largest reply (a batch of 128 requests of 64 entries is 32,896 integers, about 400 KB)
// and its longest string (a Lua error, a node's address).
struct ReplyLimits {
  int max_elements = 1 << 20;                   // per reply, nested arrays' elements included
  size_t max_bulk_bytes = size_t{1} << 20;      // per bulk string, and per status or error line
  size_t max_pending_bytes = size_t{64} << 20;  // received but not yet a whole reply
};

// Turns a byte stream into replies.
class ReplyParser {
 public:
  explicit ReplyParser(ReplyLimits limits = {});
  ~ReplyParser();
  ReplyParser(const ReplyParser&) = delete;
  ReplyParser& operator=(const ReplyParser&) = delete;

  // Bytes that break a limit are not kept: Next() reports the breach, and the stream stays
  // failed.
  void Feed(const char* data, size_t len);
  // The next complete reply, nullopt when more bytes are needed, or kInternal when the stream
  // is not RESP or breaks a limit (the connection must then be dropped).
  Result<std::optional<Reply>> Next();
  // Bytes received and kept, not yet handed out as replies.
  size_t buffered() const;

 private:
  // Follows the stream's framing ahead of hiredis, just enough to see each declared size.
  class Framing {
   public:
    explicit Framing(const ReplyLimits& limits) : limits_(limits) {}
    // Ok, or why the bytes break a limit. Once it has failed, or met bytes that are not RESP
    // (hiredis says why), it checks nothing more.
    Status Scan(const char* data, size_t len);

   private:
    enum class Phase : uint8_t { kType, kLine, kPayload, kStopped };
    Status EndLine();
    void EndItem();

    const ReplyLimits limits_;
    Phase phase_ = Phase::kType;
    char type_ = 0;
    uint64_t number_ = 0;  // the line's decimal number, for '$' and '*' (saturating)
    bool negative_ = false;
    size_t line_bytes_ = 0;
    uint64_t payload_left_ = 0;   // a bulk string's bytes still to come, its CRLF included
    std::vector<uint64_t> open_;  // elements still to come, per open array (outermost first)
    uint64_t reply_elements_ = 0;
  };

  ReplyLimits limits_;
  Framing framing_;
  Status failed_;
  redisReader* reader_;
};

// Reply inspection helpers.
bool IsError(const redisReply& r);
// Status/string/error text; empty for other types.
std::string_view Text(const redisReply& r);
// An array of integers into `out` (replacing its contents); false for anything else.
bool ToIntegers(const redisReply& r, std::vector<int64_t>& out);

// One array reply holding `elements`, in order (a pipeline's replies answered as one).
Reply ArrayOf(std::vector<Reply> elements);

}  // namespace caudal::redis
