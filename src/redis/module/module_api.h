// The part of Redis's module API (Redis 7.0+, Valkey 8) the caudal module calls, declared here
// from its published reference: a module is handed one function, the first word of the context
// it is loaded with, that looks every other function up by its name ("RedisModule_OpenKey", ...),
// and LoadApi fills this table with them. Only what consume_module.cc uses is declared.
#pragma once

#include <cstddef>

extern "C" {
struct RedisModuleCtx;
struct RedisModuleKey;
struct RedisModuleString;
struct RedisModuleCallReply;
}

namespace caudal::redis::module {

inline constexpr int kOk = 0;
inline constexpr int kErr = 1;
inline constexpr int kApiVersion1 = 1;
// OpenKey's modes.
inline constexpr int kRead = 1 << 0;
inline constexpr int kWrite = 1 << 1;
// KeyType's answers (those the module tells apart).
inline constexpr int kKeyEmpty = 0;
inline constexpr int kKeyString = 1;

using CommandFunc = int (*)(RedisModuleCtx*, RedisModuleString**, int);

struct Api {
  int (*IsModuleNameBusy)(const char* name);
  void (*SetModuleAttribs)(RedisModuleCtx*, const char* name, int version, int api_version);
  int (*CreateCommand)(RedisModuleCtx*, const char* name, CommandFunc, const char* flags,
                       int first_key, int last_key, int key_step);
  int (*IsKeysPositionRequest)(RedisModuleCtx*);
  void (*KeyAtPos)(RedisModuleCtx*, int pos);
  const char* (*StringPtrLen)(const RedisModuleString*, size_t* len);
  RedisModuleKey* (*OpenKey)(RedisModuleCtx*, RedisModuleString* name, int mode);
  void (*CloseKey)(RedisModuleKey*);
  int (*KeyType)(RedisModuleKey*);
  // A string key's bytes, to read (kRead) or to write in place (kWrite).
  char* (*StringDMA)(RedisModuleKey*, size_t* len, int mode);
  // Resizes a string key, creating it when empty.
  int (*StringTruncate)(RedisModuleKey*, size_t len);
  // The key's TTL from now, in ms.
  int (*SetExpire)(RedisModuleKey*, long long ms);
  long long (*Milliseconds)();
  // Propagates a command to replicas and the AOF (the call's effects, as a script's are).
  int (*Replicate)(RedisModuleCtx*, const char* command, const char* format, ...);
  RedisModuleCallReply* (*Call)(RedisModuleCtx*, const char* command, const char* format, ...);
  RedisModuleCallReply* (*CallReplyArrayElement)(RedisModuleCallReply*, size_t index);
  const char* (*CallReplyStringPtr)(RedisModuleCallReply*, size_t* len);
  void (*FreeCallReply)(RedisModuleCallReply*);
  int (*ReplyWithArray)(RedisModuleCtx*, long len);
  int (*ReplyWithLongLong)(RedisModuleCtx*, long long value);
  int (*ReplyWithError)(RedisModuleCtx*, const char* message);
  int (*ReplyWithStringBuffer)(RedisModuleCtx*, const char* bytes, size_t len);
  int (*WrongArity)(RedisModuleCtx*);
};

// Fills `api` through the lookup function `ctx` carries; false when one is missing (a server too
// old), and then nothing of `api` may be called.
inline bool LoadApi(RedisModuleCtx* ctx, Api& api) {
  using GetApi = int (*)(const char*, void*);
  const auto get = reinterpret_cast<GetApi>(*reinterpret_cast<void**>(ctx));
  bool ok = true;
  const auto load = [&](const char* name, auto& fn) {
    if (get(name, static_cast<void*>(&fn)) != kOk) ok = false;
  };
  load("RedisModule_IsModuleNameBusy", api.IsModuleNameBusy);
  load("RedisModule_SetModuleAttribs", api.SetModuleAttribs);
  load("RedisModule_CreateCommand", api.CreateCommand);
  load("RedisModule_IsKeysPositionRequest", api.IsKeysPositionRequest);
  load("RedisModule_KeyAtPos", api.KeyAtPos);
  load("RedisModule_StringPtrLen", api.StringPtrLen);
  load("RedisModule_OpenKey", api.OpenKey);
  load("RedisModule_CloseKey", api.CloseKey);
  load("RedisModule_KeyType", api.KeyType);
  load("RedisModule_StringDMA", api.StringDMA);
  load("RedisModule_StringTruncate", api.StringTruncate);
  load("RedisModule_SetExpire", api.SetExpire);
  load("RedisModule_Milliseconds", api.Milliseconds);
  load("RedisModule_Replicate", api.Replicate);
  load("RedisModule_Call", api.Call);
  load("RedisModule_CallReplyArrayElement", api.CallReplyArrayElement);
  load("RedisModule_CallReplyStringPtr", api.CallReplyStringPtr);
  load("RedisModule_FreeCallReply", api.FreeCallReply);
  load("RedisModule_ReplyWithArray", api.ReplyWithArray);
  load("RedisModule_ReplyWithLongLong", api.ReplyWithLongLong);
  load("RedisModule_ReplyWithError", api.ReplyWithError);
  load("RedisModule_ReplyWithStringBuffer", api.ReplyWithStringBuffer);
  load("RedisModule_WrongArity", api.WrongArity);
  return ok;
}

}  // namespace caudal::redis::module
