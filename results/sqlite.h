// A thin RAII layer over the SQLite C API: a connection, prepared statements and a
// transaction guard. Failures throw sqlite::Error (code + SQLite's message); the Store catches
// them at its API boundary and turns them into Problems, so nothing above results/ sees them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace monarch::sqlite {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }                // extended result code
  int primary_code() const { return code_ & 0xff; }  // SQLITE_FULL, SQLITE_BUSY, ...

 private:
  int code_;
};

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);  // prepares, throws Error
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in sqlite3_bind_*. Doubles that are not finite bind as NULL.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, const std::string& value);
  Statement& bind_null(int index);

  bool step();       // true: a row is ready; false: done. Throws Error on failure.
  void run();        // step() to completion for statements without rows, then reset().
  void reset();      // rewinds and clears bindings, ready for the next use

  // Columns are 0-based, as in sqlite3_column_*.
  bool is_null(int column) const;
  int64_t int64(int column) const;
  double real(int column) const;  // NULL reads as NaN
  std::string text(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  Database() = default;
  // flags: SQLITE_OPEN_* bits. Throws Error; the handle is closed on failure.
  Database(const std::string& path, int flags);
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  Statement prepare(const std::string& sql) const { return Statement(db_, sql); }
  void exec(const std::string& sql) const;  // for fixed SQL without parameters (DDL, PRAGMA)
  int64_t query_int(const std::string& sql) const;  // first column of the first row
  std::string query_text(const std::string& sql) const;
  int64_t last_insert_rowid() const;
  bool read_only() const;

 private:
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so two writers queue on the
// busy timeout instead of deadlocking on a lock upgrade); ROLLBACK on destruction unless
// commit() ran.
class Transaction {
 public:
  explicit Transaction(const Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  const Database& db_;
  bool open_ = false;
};

// Throws Error for a result code that is not SQLITE_OK.
void check(sqlite3* db, int rc, const std::string& what);

}  // namespace monarch::sqlite
