// Fuzzer for the caudal Redis module's CAUDAL.CONSUME (src/redis/module/consume_module.cc): any
// client of a server that loaded it may send it anything, and a crash there is the server's.
//
// The module is loaded here against an in-memory stand-in for Redis's module API (the keys a
// map, TIME a constant), so the command runs in-process under the fuzzer's sanitizers. The first
// bytes pick the key count, which keys hold a value (taken from the input: any bytes, a state or
// a group value or garbage) or are of another type, and whether the time is given; the rest are
// the call's request arguments, each length-prefixed. The call runs twice (the second reads what
// the first wrote). Every reply is an error or an array of integers ending with the call's time;
// every value written is a state (33 bytes, tag 1) or a group (17 + 40n bytes, tag 2, at most
// kMaxGroupMembers members), with a TTL; a key of another type is never written.
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "redis/lua_protocol.h"
#include "redis/script.h"

struct RedisModuleCtx {
  void* get_api;  // the lookup function, the first word as Redis lays it out
};
struct RedisModuleString {
  std::string bytes;
};
struct RedisModuleKey {
  std::string name;
};
struct RedisModuleCallReply {
  std::vector<std::string> parts;
  std::string part;
};

extern "C" int RedisModule_OnLoad(RedisModuleCtx* ctx, RedisModuleString** argv, int argc);

namespace caudal {
namespace {

struct Value {
  std::string bytes;
  bool string = true;  // false: a key of another type (a list)
  long long ttl = -1;
};
std::map<std::string, Value> db;
using CommandFunc = int (*)(RedisModuleCtx*, RedisModuleString**, int);
std::map<std::string, CommandFunc> commands;
// The reply: an error, or integers.
bool replied_error = false;
long array_len = -2;
std::vector<long long> ints;

int IsModuleNameBusy(const char*) { return 0; }
void SetModuleAttribs(RedisModuleCtx*, const char*, int, int) {}
int CreateCommand(RedisModuleCtx*, const char* name, CommandFunc f, const char*, int, int, int) {
  commands[name] = f;
  return 0;
}
int IsKeysPositionRequest(RedisModuleCtx*) { return 0; }
void KeyAtPos(RedisModuleCtx*, int) {}
const char* StringPtrLen(const RedisModuleString* s, size_t* len) {
  *len = s->bytes.size();
  return s->bytes.data();
}
RedisModuleKey* OpenKey(RedisModuleCtx*, RedisModuleString* name, int) {
  return new RedisModuleKey{name->bytes};
}
void CloseKey(RedisModuleKey* k) { delete k; }
int KeyType(RedisModuleKey* k) {
  const auto it = db.find(k->name);
  if (it == db.end()) return 0;
  return it->second.string ? 1 : 2;
}
char* StringDMA(RedisModuleKey* k, size_t* len, int mode) {
  Value& v = db.at(k->name);
  FUZZ_CHECK(v.string);
  if (mode & 2) v.ttl = v.ttl;  // (a write in place keeps the TTL)
  *len = v.bytes.size();
  return v.bytes.data();
}
int StringTruncate(RedisModuleKey* k, size_t len) {
  const auto it = db.find(k->name);
  if (it != db.end()) FUZZ_CHECK(it->second.string);
  db[k->name].bytes.resize(len);
  return 0;
}
int SetExpire(RedisModuleKey* k, long long ms) {
  FUZZ_CHECK(ms > 0);
  db.at(k->name).ttl = ms;
  return 0;
}
long long Milliseconds() { return 1'800'000'000'000; }
int Replicate(RedisModuleCtx*, const char* command, const char*, ...) {
  FUZZ_CHECK(std::string_view(command) == "SET");
  return 0;
}
RedisModuleCallReply* Call(RedisModuleCtx*, const char* command, const char*, ...) {
  FUZZ_CHECK(std::string_view(command) == "TIME");
  return new RedisModuleCallReply{{"1800000000", "123456"}, ""};
}
RedisModuleCallReply* CallReplyArrayElement(RedisModuleCallReply* r, size_t i) {
  if (i >= r->parts.size()) return nullptr;
  r->part = r->parts[i];
  return r;
}
const char* CallReplyStringPtr(RedisModuleCallReply* r, size_t* len) {
  *len = r->part.size();
  return r->part.data();
}
void FreeCallReply(RedisModuleCallReply* r) { delete r; }
int ReplyWithArray(RedisModuleCtx*, long len) {
  FUZZ_CHECK(array_len == -2 && !replied_error);
  array_len = len;
  return 0;
}
int ReplyWithLongLong(RedisModuleCtx*, long long v) {
  ints.push_back(v);
  return 0;
}
int ReplyWithError(RedisModuleCtx*, const char* message) {
  FUZZ_CHECK(array_len == -2 && !replied_error);
  FUZZ_CHECK(std::strlen(message) > 0);
  replied_error = true;
  return 0;
}
int ReplyWithStringBuffer(RedisModuleCtx*, const char*, size_t) { return 0; }
int WrongArity(RedisModuleCtx*) { return ReplyWithError(nullptr, "ERR wrong number of arguments"); }

int GetApi(const char* name, void* out) {
  static const std::map<std::string_view, void*> table = {
      {"RedisModule_IsModuleNameBusy", reinterpret_cast<void*>(&IsModuleNameBusy)},
      {"RedisModule_SetModuleAttribs", reinterpret_cast<void*>(&SetModuleAttribs)},
      {"RedisModule_CreateCommand", reinterpret_cast<void*>(&CreateCommand)},
      {"RedisModule_IsKeysPositionRequest", reinterpret_cast<void*>(&IsKeysPositionRequest)},
      {"RedisModule_KeyAtPos", reinterpret_cast<void*>(&KeyAtPos)},
      {"RedisModule_StringPtrLen", reinterpret_cast<void*>(&StringPtrLen)},
      {"RedisModule_OpenKey", reinterpret_cast<void*>(&OpenKey)},
      {"RedisModule_CloseKey", reinterpret_cast<void*>(&CloseKey)},
      {"RedisModule_KeyType", reinterpret_cast<void*>(&KeyType)},
      {"RedisModule_StringDMA", reinterpret_cast<void*>(&StringDMA)},
      {"RedisModule_StringTruncate", reinterpret_cast<void*>(&StringTruncate)},
      {"RedisModule_SetExpire", reinterpret_cast<void*>(&SetExpire)},
      {"RedisModule_Milliseconds", reinterpret_cast<void*>(&Milliseconds)},
      {"RedisModule_Replicate", reinterpret_cast<void*>(&Replicate)},
      {"RedisModule_Call", reinterpret_cast<void*>(&Call)},
      {"RedisModule_CallReplyArrayElement", reinterpret_cast<void*>(&CallReplyArrayElement)},
      {"RedisModule_CallReplyStringPtr", reinterpret_cast<void*>(&CallReplyStringPtr)},
      {"RedisModule_FreeCallReply", reinterpret_cast<void*>(&FreeCallReply)},
      {"RedisModule_ReplyWithArray", reinterpret_cast<void*>(&ReplyWithArray)},
      {"RedisModule_ReplyWithLongLong", reinterpret_cast<void*>(&ReplyWithLongLong)},
      {"RedisModule_ReplyWithError", reinterpret_cast<void*>(&ReplyWithError)},
      {"RedisModule_ReplyWithStringBuffer", reinterpret_cast<void*>(&ReplyWithStringBuffer)},
      {"RedisModule_WrongArity", reinterpret_cast<void*>(&WrongArity)},
  };
  const auto it = table.find(name);
  if (it == table.end()) return 1;
  std::memcpy(out, &it->second, sizeof(void*));
  return 0;
}

CommandFunc Consume() {
  static const CommandFunc consume = [] {
    RedisModuleCtx ctx{reinterpret_cast<void*>(&GetApi)};
    FUZZ_CHECK(RedisModule_OnLoad(&ctx, nullptr, 0) == 0);
    return commands.at("caudal.consume");
  }();
  return consume;
}

// The input read front to back: a byte, or a length-prefixed part.
struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t Byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::string Part() {
    size_t len = Byte();
    if (len == 255) len = 255 + Byte() * 8;  // a long one
    len = std::min(len, n);
    std::string out(reinterpret_cast<const char*>(p), len);
    p += len;
    n -= len;
    return out;
  }
};

void CheckWritten(const Value& v) {
  if (!v.string) return;
  const std::string& b = v.bytes;
  const bool state = b.size() == 33 && b[0] == 1;
  const bool group = b.size() >= 17 && b.size() % 40 == 17 && b[0] == 2 &&
                     (b.size() - 17) / 40 <= static_cast<size_t>(redis::kMaxGroupMembers);
  FUZZ_CHECK(state || group);
  FUZZ_CHECK(v.ttl > 0);
}

void Run(const uint8_t* data, size_t size) {
  const CommandFunc consume = Consume();
  Input in{data, size};
  db.clear();
  const int nkeys = in.Byte() % 5;
  const uint8_t present = in.Byte(), lists = in.Byte(), given = in.Byte();
  std::vector<std::string> argv = {"CAUDAL.CONSUME", std::string(redis::kConsumeFunction),
                                   std::to_string(nkeys)};
  std::map<std::string, std::string> before;
  for (int k = 0; k < nkeys; ++k) {
    const std::string key = "caudal:{k" + std::to_string(k % 3) + "}";  // some keys repeat
    argv.push_back(key);
    if (present & (1 << k)) {
      db[key] = {.bytes = in.Part(), .string = (lists & (1 << k)) == 0, .ttl = 1000};
    }
  }
  for (const auto& [key, v] : db) before[key] = v.bytes;
  argv.push_back(given & 1 ? "1800000000000000" : "");
  argv.push_back(given & 2 ? "3600000" : "0");
  while (in.n > 0 && argv.size() < 40) argv.push_back(in.Part());
  for (int round = 0; round < 2; ++round) {
    std::vector<RedisModuleString> strings(argv.size());
    std::vector<RedisModuleString*> ptrs;
    for (size_t i = 0; i < argv.size(); ++i) {
      strings[i].bytes = argv[i];
      ptrs.push_back(&strings[i]);
    }
    replied_error = false;
    array_len = -2;
    ints.clear();
    RedisModuleCtx ctx{reinterpret_cast<void*>(&GetApi)};
    consume(&ctx, ptrs.data(), static_cast<int>(ptrs.size()));
    FUZZ_CHECK(replied_error != (array_len != -2));
    if (!replied_error) {
      FUZZ_CHECK(array_len == static_cast<long>(ints.size()) && !ints.empty());
      FUZZ_CHECK(ints.back() == (given & 1 ? 1'800'000'000'000'000 : 1'800'000'000'123'456));
    }
    for (const auto& [key, v] : db) {
      const auto was = before.find(key);
      if (!v.string) {
        FUZZ_CHECK(was != before.end() && v.bytes == was->second);
      } else if (was == before.end() || v.bytes != was->second) {
        CheckWritten(v);
      }
    }
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(data, size);
  return 0;
}
