// SPDX-License-Identifier: MIT
/*
 * ringprof for C++: RAII scopes over the C fast path of <ringprof/ringprof.h>.
 *
 *	void decode() {
 *		RINGPROF_SCOPE("decode", "LLM");	// interned once per call site
 *		...
 *	}						// rp_end() however the block is left
 *
 * Everything here is a thin inline wrapper: a Scope is one name id, its constructor
 * is rp_begin() and its destructor rp_end(), so the cost per scope is the C cost.
 * Nothing throws, allocates or uses RTTI: it builds with -fno-exceptions -fno-rtti,
 * C++11 and later. A scope unwound by an exception still closes (a destructor); a
 * longjmp past it does not (as for any RAII object), but the thread's nesting heals
 * at the next scope or END of a shallower function (docs/cpp.md).
 *
 * The call-site cache of RINGPROF_SCOPE is the C header's (rp_scope_id): a relaxed
 * load per pass, no function-local static guard, so no libstdc++ dependence and no
 * lock after the first pass.
 */
#ifndef RINGPROF_RINGPROF_HPP
#define RINGPROF_RINGPROF_HPP

#include <stdint.h>

#include <ringprof/ringprof.h>

namespace ringprof {

/** intern() - the id of (name, category, file, line); takes a lock: keep the id. */
inline uint32_t intern(const char *name, const char *category = "", const char *file = nullptr,
		       uint32_t line = 0) noexcept
{
	return rp_intern(name, category, file, line);
}

/** Scope - a span on this thread's stack for the lifetime of the object. */
class Scope {
public:
	/* @frame: the CFA of the function that makes the scope (a default argument is
	 * evaluated in the caller), so that after a longjmp out of scopes the next
	 * scope of a shallower function heals the nesting (ringprof.h, rp_begin_frame).
	 * A Scope must end in the function that made it (on its stack, as RAII does). */
	explicit Scope(uint32_t name,
		       uintptr_t frame = (uintptr_t)__builtin_dwarf_cfa()) noexcept
		: name_(name), error_(false)
	{
		rp_begin_frame(name_, frame, (uintptr_t)this);
	}
	~Scope()
	{
		/* rp_end_frame(), with the error flag when error() was called. */
		rp_emit_full(true, 0, RP_EV_END, error_ ? RP_SPAN_ERROR : 0, name_, 0, 0,
			     RP_HEAL_FRAME, 0, (uintptr_t)this + 1, 0);
	}
	Scope(const Scope &) = delete;
	Scope &operator=(const Scope &) = delete;
	/* error() - the span ends in error (rp_end_error()) when the scope is left. */
	void error() noexcept
	{
		error_ = true;
	}

private:
	uint32_t name_;
	bool error_;
};

/*
 * FineScope - a Scope of a fine-grained name (rp_begin_fine(), docs/summaries.md):
 * folded into its thread's summaries when shorter than the fine threshold.
 */
class FineScope {
public:
	explicit FineScope(uint32_t name,
			   uintptr_t frame = (uintptr_t)__builtin_dwarf_cfa()) noexcept
		: name_(name)
	{
		rp_begin_fine_frame(name_, frame, (uintptr_t)this);
	}
	~FineScope()
	{
		rp_end_fine_frame(name_, (uintptr_t)this);
	}
	FineScope(const FineScope &) = delete;
	FineScope &operator=(const FineScope &) = delete;

private:
	uint32_t name_;
};

/*
 * AsyncScope - a span on a track (a request) that is not nested per thread: it may
 * be moved to another thread and end there. end() closes it early; a moved-from,
 * ended or default-constructed scope records nothing (more).
 */
class AsyncScope {
public:
	AsyncScope() noexcept : name_(0), track_(0), span_(0), open_(false)
	{
	}
	AsyncScope(uint32_t name, uint64_t track, uint64_t span) noexcept
		: name_(name), track_(track), span_(span), open_(true)
	{
		rp_async_begin(name_, track_, span_);
	}
	AsyncScope(AsyncScope &&o) noexcept
		: name_(o.name_), track_(o.track_), span_(o.span_), open_(o.open_), error_(o.error_)
	{
		o.open_ = false;
	}
	AsyncScope &operator=(AsyncScope &&o) noexcept
	{
		if (this != &o) {
			end();
			name_ = o.name_;
			track_ = o.track_;
			span_ = o.span_;
			open_ = o.open_;
			error_ = o.error_;
			o.open_ = false;
		}
		return *this;
	}
	AsyncScope(const AsyncScope &) = delete;
	AsyncScope &operator=(const AsyncScope &) = delete;
	~AsyncScope()
	{
		end();
	}
	void end() noexcept
	{
		if (open_ && error_)
			rp_async_end_error(name_, track_, span_);
		else if (open_)
			rp_async_end(name_, track_, span_);
		open_ = false;
	}
	/* error() - the span ends in error (rp_async_end_error()) at end(). */
	void error() noexcept
	{
		error_ = true;
	}

private:
	uint32_t name_;
	uint64_t track_, span_;
	bool open_;
	bool error_ = false;
};

/** Counter - a named counter; set() records one sample. */
class Counter {
public:
	explicit Counter(uint32_t name) noexcept : name_(name)
	{
	}
	Counter(const char *name, const char *category) noexcept
		: name_(rp_intern(name, category, nullptr, 0))
	{
	}
	void set(int64_t value) const noexcept
	{
		rp_counter(name_, value);
	}
	uint32_t id() const noexcept
	{
		return name_;
	}

private:
	uint32_t name_;
};

/** instant() - a point event. */
inline void instant(uint32_t name) noexcept
{
	rp_instant(name);
}

} // namespace ringprof

/* The id of (name, category, this file, this line), interned on the first pass. */
#define RINGPROF_ID(name, category)                                                    \
	([](const char *n_, const char *c_, const char *f_, uint32_t l_) noexcept {      \
		static uint32_t cache_ = UINT32_MAX;                                     \
		return rp_scope_id(&cache_, n_, c_, f_, l_);                             \
	}((name), (category), __FILE__, __LINE__))

/* A scope to the end of the enclosing block, named once per call site. */
#define RINGPROF_SCOPE(name, category)                                                 \
	::ringprof::Scope RP_CONCAT(rp_cxx_scope_, __LINE__)(RINGPROF_ID(name, category))

/* A fine-grained scope (FineScope) to the end of the enclosing block. */
#define RINGPROF_FINE_SCOPE(name, category)                                            \
	::ringprof::FineScope RP_CONCAT(rp_cxx_fine_, __LINE__)(RINGPROF_ID(name, category))

/* An async span on @track with span id @span, to the end of the enclosing block
 * (or moved elsewhere: use ::ringprof::AsyncScope with RINGPROF_ID directly). */
#define RINGPROF_ASYNC_SCOPE(name, category, track, span)                              \
	::ringprof::AsyncScope RP_CONCAT(rp_cxx_async_, __LINE__)(                       \
		RINGPROF_ID(name, category), (track), (span))

/* One counter sample, the name interned once per call site. */
#define RINGPROF_COUNTER(name, category, value)                                        \
	rp_counter(RINGPROF_ID(name, category), (int64_t)(value))

#endif /* RINGPROF_RINGPROF_HPP */
