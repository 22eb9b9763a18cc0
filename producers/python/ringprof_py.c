// SPDX-License-Identifier: MIT
/*
 * ringprof._ringprof: the CPython producer, on top of libringprof (same segment per
 * process, one ring per thread, the same clock and fork rule as C programs).
 *
 * Spans. A span interns its (name, category) once, at construction; entering and
 * leaving it are C methods with no Python frame. Outside a request a span is a
 * BEGIN/END pair on the thread's stack, exactly as rp_begin()/rp_end(), unless a
 * coroutine enters it: then it roots a track of its own (task_span_open). Inside a
 * request (a context variable holds the innermost open span of the request, a
 * `node`) it is RP_EV_CHILD_BEGIN/END on the request's track with its parent's span
 * id: a task or thread that copied the context carries its parent with it, so
 * tasks running at once are siblings under the span that was open when they were
 * made, and a span held across an `await` stays open on the request, not on the
 * thread that ran it. A request is the root (span 1) of its own track.
 *
 * Leaving a span in a request pops the innermost node of its name: a generator
 * suspended inside a span leaks its node into its consumer's context (contextvars
 * do not follow generators), so the consumer's own spans close theirs by name.
 *
 * Calls. trace_calls() installs a C profile hook (PyEval_SetProfile), cProfile
 * style: a CALL is a BEGIN and a RETURN an END of the code object's name, whose id
 * is interned once per code object and kept in the code object's extra slot (or
 * RP_PY_SKIP, filtered out), or on 3.11 a frame-evaluation hook; calls made while an
 * import runs a module body are summarized at the source (eval_import).
 *
 * RINGPROF=0: rp_init() says so at import; every call then returns at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <fnmatch.h>
#include <string.h>

/* CPython 3.11: the profile hook reads a frame's code object and the code
 * object's extra slot in place (no calls, no reference counting). */
#if PY_VERSION_HEX >= 0x030b0000 && PY_VERSION_HEX < 0x030c0000
#define Py_BUILD_CORE 1
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define RP_PY311 1
/* co_extra's layout, private to 3.11's Objects/codeobject.c (_PyCodeObjectExtra). */
typedef struct {
	Py_ssize_t ce_size;
	void *ce_extras[1];
} rp_code_extra;
#endif

#include <ringprof/ringprof.h>

static PyObject *g_current;	/* ContextVar: the innermost open node of a request */
static int g_off = 1;		/* recording is off (RINGPROF=0 or no segment) */
static uint64_t g_next_track;	/* track ids of this process's requests */
static int g_requests;		/* a request was ever opened: the context variable
				   may be set (until then spans need not look) */
static Py_ssize_t g_extra = -1; /* code object extra slot: interned id + 1 */
static int g_builtins;		/* trace_calls(): C functions too */
static PyObject *g_names;	/* counter/instant names -> id */
static PyObject *g_marks;	/* milestone names -> id (category "milestone") */
static PyObject *g_decorate;	/* ringprof._decorate(span, func) */
static PyObject *g_threading_setprofile;
static PyObject *g_str_name, *g_str_main; /* "__name__", "__main__": import-time calls */

/* ---- nodes: the open spans of a request ---- */

typedef struct node {
	PyObject_HEAD struct node *parent; /* NULL for the request's root */
	struct node *root;		   /* the request's root; NULL for the root itself */
	uint64_t track;
	uint32_t span;
	uint32_t name;
	uint32_t next; /* root only: the last span id handed out */
	uint8_t error; /* span.error() was called while it was open: it ends in error */
	int task;      /* root only: a span's own track in a coroutine, not a request */
} Node;

static void node_dealloc(Node *n)
{
	Py_XDECREF(n->parent);
	Py_XDECREF(n->root);
	PyObject_Free(n);
}

static PyTypeObject NodeType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof._Node",
	.tp_basicsize = sizeof(Node),
	.tp_dealloc = (destructor)node_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
};

static Node *node_new(Node *parent, uint32_t name)
{
	Node *n = PyObject_New(Node, &NodeType);
	Node *root;

	if (n == NULL)
		return NULL;
	n->name = name;
	n->next = 0;
	n->error = 0;
	n->task = 0;
	if (parent == NULL) { /* a request */
		n->parent = n->root = NULL;
		n->track = ++g_next_track; /* under the GIL */
		n->span = 1;
		n->next = 1;
		return n;
	}
	root = parent->root ? parent->root : parent;
	Py_INCREF(parent);
	Py_INCREF(root);
	n->parent = parent;
	n->root = root;
	n->track = root->track;
	n->span = ++root->next;
	return n;
}

/* The current node (a new reference), NULL outside a request; -1 on error. */
static int current(Node **out)
{
	PyObject *v;

	if (PyContextVar_Get(g_current, NULL, &v) < 0)
		return -1;
	if (v == Py_None) {
		Py_DECREF(v);
		v = NULL;
	}
	*out = (Node *)v;
	return 0;
}

static int set_current(PyObject *v)
{
	PyObject *tok = PyContextVar_Set(g_current, v ? v : Py_None);

	if (tok == NULL)
		return -1;
	Py_DECREF(tok);
	return 0;
}

/* ---- span enter/exit, shared by `with`, `async with` and the C wrapper ---- */

/*
 * Is the span entered by a coroutine (`with`/`async with` in an async def, or the
 * decorator of one)? Outside a request such a span may be held across an `await`
 * while the thread runs other tasks' spans: on the thread's stack they would
 * interleave (fake recursion, cum cut short). It opens a track of its own instead,
 * rooted at the span (a task's context is its own: the span's nested spans and the
 * tasks it starts follow it there, as in a request), measured exactly.
 */
static int in_coroutine(void)
{
	int flags;
#ifdef RP_PY311
	struct _PyInterpreterFrame *f = PyThreadState_GET()->cframe->current_frame;

	if (f == NULL)
		return 0;
	flags = f->f_code->co_flags;
#else
	PyFrameObject *f = PyEval_GetFrame();
	PyCodeObject *co;

	if (f == NULL)
		return 0;
	co = PyFrame_GetCode(f);
	flags = co->co_flags;
	Py_DECREF(co);
#endif
	return (flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) != 0;
}

/* A coroutine's span outside a request: the root of a new track (in_coroutine()). */
static int task_span_open(uint32_t id)
{
	Node *n = node_new(NULL, id);
	int rc;

	if (n == NULL)
		return -1;
	n->task = 1;
	g_requests = 1; /* spans must look at the context variable from now on */
	rp_task_begin(id, n->track, n->span); /* a task's track: not a request */
	rc = set_current((PyObject *)n);
	Py_DECREF(n);
	return rc;
}

static int span_enter(uint32_t id)
{
	Node *cur, *n;
	int rc;

	if (g_off)
		return 0;
	if (!g_requests) {
		if (RP_UNLIKELY(in_coroutine()))
			return task_span_open(id);
		rp_begin(id);
		return 0;
	}
	if (current(&cur) < 0)
		return -1;
	if (cur == NULL) {
		if (in_coroutine())
			return task_span_open(id);
		rp_begin(id);
		return 0;
	}
	n = node_new(cur, id);
	if (n == NULL) {
		Py_DECREF(cur);
		return -1;
	}
	rp_child_begin(id, n->track, cur->span, n->span);
	rc = set_current((PyObject *)n);
	Py_DECREF(n);
	Py_DECREF(cur);
	return rc;
}

/* span.error() outside requests: the name whose next exit on this thread is an error
 * (a thread's spans nest, so it is the innermost open one of that name). */
static __thread uint32_t t_error_id = UINT32_MAX;

/* Closes the innermost open span @id; @error: it ends in error (an exception left it,
 * or span.error() was called), RP_SPAN_ERROR on its END. */
static int span_exit(uint32_t id, bool error)
{
	Node *cur, *n;
	int rc = 0;

	if (g_off)
		return 0;
	if (t_error_id == id) {
		error = true;
		t_error_id = UINT32_MAX;
	}
	if (!g_requests) {
		rp_emit(RP_EV_END, error ? RP_SPAN_ERROR : 0, id, 0, 0);
		return 0;
	}
	if (current(&cur) < 0)
		return -1;
	if (cur == NULL) {
		rp_emit(RP_EV_END, error ? RP_SPAN_ERROR : 0, id, 0, 0);
		return 0;
	}
	for (n = cur; n->root != NULL && n->name != id; n = n->parent)
		;
	/* A request's root is closed by the request only; a coroutine span's own track
	 * (task_span_open) ends with its root span. */
	if (n->root == NULL && !(n->task && n->name == id)) {
		/* none open: the engine counts it end_unmatched */
		rp_child_end(id, cur->track, 0);
	} else {
		rp_emit(RP_EV_CHILD_END, error || n->error ? RP_SPAN_ERROR : 0, id, n->track,
			n->span);
		rc = set_current((PyObject *)n->parent);
	}
	Py_DECREF(cur);
	return rc;
}

/* ---- an awaitable that is already done (async with) ---- */

typedef struct {
	PyObject_HEAD PyObject *value;
} Done;

static void done_dealloc(Done *d)
{
	Py_XDECREF(d->value);
	PyObject_Free(d);
}

static PyObject *done_self(PyObject *d)
{
	return Py_NewRef(d);
}

static PyObject *done_next(Done *d)
{
	PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, d->value);

	if (e != NULL) {
		PyErr_SetObject(PyExc_StopIteration, e);
		Py_DECREF(e);
	}
	return NULL;
}

static PyAsyncMethods done_async = { .am_await = done_self };

static PyTypeObject DoneType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof._Done",
	.tp_basicsize = sizeof(Done),
	.tp_dealloc = (destructor)done_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_as_async = &done_async,
	.tp_iter = done_self,
	.tp_iternext = (iternextfunc)done_next,
};

static PyObject *done_new(PyObject *value)
{
	Done *d = PyObject_New(Done, &DoneType);

	if (d != NULL)
		d->value = Py_NewRef(value);
	return (PyObject *)d;
}

/* ---- span ---- */

typedef struct {
	PyObject_HEAD uint32_t id;
	PyObject *name, *category;
} Span;

static uint32_t intern_obj(PyObject *name, PyObject *category, const char *dflt_cat)
{
	const char *n = PyUnicode_AsUTF8(name);
	const char *c = category && category != Py_None ? PyUnicode_AsUTF8(category) : dflt_cat;

	if (n == NULL || c == NULL)
		return UINT32_MAX;
	return g_off ? 0 : rp_intern(n, c, NULL, 0);
}

static int span_init(Span *s, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "category", NULL };
	PyObject *name, *cat = Py_None;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "U|O:span", kwlist, &name, &cat))
		return -1;
	if (cat != Py_None && !PyUnicode_Check(cat)) {
		PyErr_SetString(PyExc_TypeError, "span(): category must be a str or None");
		return -1;
	}
	if ((s->id = intern_obj(name, cat, "")) == UINT32_MAX)
		return -1;
	Py_XSETREF(s->name, Py_NewRef(name));
	Py_XSETREF(s->category, Py_NewRef(cat));
	return 0;
}

static void span_dealloc(Span *s)
{
	Py_XDECREF(s->name);
	Py_XDECREF(s->category);
	Py_TYPE(s)->tp_free(s);
}

static PyObject *span_enter_m(Span *s, PyObject *unused)
{
	(void)unused;
	if (span_enter(s->id) < 0)
		return NULL;
	return Py_NewRef(s);
}

/* __exit__(type, value, tb): an exception (type not None) ends the span in error. */
static bool exc_given(PyObject *const *args, Py_ssize_t n)
{
	return n >= 1 && args[0] != Py_None;
}

static PyObject *span_exit_m(Span *s, PyObject *const *args, Py_ssize_t n)
{
	if (span_exit(s->id, exc_given(args, n)) < 0)
		return NULL;
	Py_RETURN_FALSE; /* exceptions propagate */
}

static PyObject *span_aenter_m(Span *s, PyObject *unused)
{
	(void)unused;
	if (span_enter(s->id) < 0)
		return NULL;
	return done_new((PyObject *)s);
}

static PyObject *span_aexit_m(Span *s, PyObject *const *args, Py_ssize_t n)
{
	if (span_exit(s->id, exc_given(args, n)) < 0)
		return NULL;
	return done_new(Py_False);
}

/* span(func): the wrapper ringprof._decorate() makes for its kind of function. */
static PyObject *span_call(Span *s, PyObject *args, PyObject *kw)
{
	PyObject *fn;

	if (kw != NULL || PyTuple_GET_SIZE(args) != 1 ||
	    !PyCallable_Check(fn = PyTuple_GET_ITEM(args, 0))) {
		PyErr_SetString(PyExc_TypeError, "span(...) decorates one callable");
		return NULL;
	}
	if (g_decorate == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "ringprof: import ringprof, not _ringprof");
		return NULL;
	}
	return PyObject_CallFunctionObjArgs(g_decorate, (PyObject *)s, fn, NULL);
}

static PyObject *span_repr(Span *s)
{
	return PyUnicode_FromFormat("<ringprof.span %R category=%R id=%u>", s->name, s->category,
				    s->id);
}

static PyObject *span_get_id(Span *s, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLong(s->id);
}

static PyObject *span_get_name(Span *s, void *unused)
{
	(void)unused;
	return Py_NewRef(s->name);
}

/* span.error(): the innermost open span of this name (in this request, when in one) ends
 * in error when it closes. */
static PyObject *span_error_m(Span *s, PyObject *unused)
{
	Node *cur = NULL, *n;

	(void)unused;
	if (g_off)
		Py_RETURN_NONE;
	if (g_requests && current(&cur) < 0)
		return NULL;
	for (n = cur; n != NULL && n->root != NULL && n->name != s->id; n = n->parent)
		;
	if (n != NULL && n->root != NULL)
		n->error = 1;
	else
		t_error_id = s->id;
	Py_XDECREF(cur);
	Py_RETURN_NONE;
}

static int charge_track(PyObject *req, uint64_t *track);

/*
 * span.charge(req): the innermost open span of this name in the current context (the
 * batch loop's forward: on its task's track, or on the thread's stack) serves request
 * @req: its time is split between the requests charged to it when it ends (rp_charge,
 * engine/core/charge.h).
 */
static PyObject *span_charge_m(Span *s, PyObject *req)
{
	Node *cur = NULL, *n;
	uint64_t track;

	if (charge_track(req, &track) < 0)
		return NULL;
	if (g_off)
		Py_RETURN_NONE;
	if (g_requests && current(&cur) < 0)
		return NULL;
	for (n = cur; n != NULL && n->name != s->id; n = n->root ? n->parent : NULL)
		;
	rp_charge(s->id, n ? n->track : 0, track); /* 0: the thread's stack */
	Py_XDECREF(cur);
	Py_RETURN_NONE;
}

static PyMethodDef span_methods[] = {
	{ "error", (PyCFunction)span_error_m, METH_NOARGS,
	  "error(): the innermost open span of this name ends in error" },
	{ "charge", (PyCFunction)span_charge_m, METH_O,
	  "charge(req): the innermost open span of this name served request `req` (a "
	  "ringprof.request): its time is split between the requests charged to it" },
	{ "__enter__", (PyCFunction)span_enter_m, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)(void (*)(void))span_exit_m, METH_FASTCALL, NULL },
	{ "__aenter__", (PyCFunction)span_aenter_m, METH_NOARGS, NULL },
	{ "__aexit__", (PyCFunction)(void (*)(void))span_aexit_m, METH_FASTCALL, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef span_getset[] = {
	{ "id", (getter)span_get_id, NULL, "the interned name id", NULL },
	{ "name", (getter)span_get_name, NULL, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject SpanType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof.span",
	.tp_doc = "span(name, category=None): a `with`/`async with` block or a decorator",
	.tp_basicsize = sizeof(Span),
	.tp_dealloc = (destructor)span_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)span_init,
	.tp_call = (ternaryfunc)span_call,
	.tp_repr = (reprfunc)span_repr,
	.tp_methods = span_methods,
	.tp_getset = span_getset,
};

/* ---- a plain function wrapped in a span (vectorcall, no Python frame) ---- */

typedef struct {
	PyObject_HEAD uint32_t id;
	PyObject *span, *fn, *dict;
	vectorcallfunc vc;
} Wrapped;

static PyObject *wrapped_vcall(PyObject *self, PyObject *const *args, size_t nargsf,
			       PyObject *kwnames)
{
	Wrapped *w = (Wrapped *)self;
	PyObject *r, *et, *ev, *tb;

	if (span_enter(w->id) < 0)
		return NULL;
	r = PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
	if (r == NULL) { /* the span closes; the exception goes on */
		PyErr_Fetch(&et, &ev, &tb);
		if (span_exit(w->id, true) < 0)
			PyErr_Clear();
		PyErr_Restore(et, ev, tb);
		return NULL;
	}
	if (span_exit(w->id, false) < 0)
		Py_CLEAR(r);
	return r;
}

static PyObject *wrapped_get(PyObject *self, PyObject *obj, PyObject *type)
{
	(void)type;
	if (obj == NULL || obj == Py_None)
		return Py_NewRef(self);
	return PyMethod_New(self, obj);
}

static int wrapped_traverse(Wrapped *w, visitproc visit, void *arg)
{
	Py_VISIT(w->span);
	Py_VISIT(w->fn);
	Py_VISIT(w->dict);
	return 0;
}

static int wrapped_clear(Wrapped *w)
{
	Py_CLEAR(w->span);
	Py_CLEAR(w->fn);
	Py_CLEAR(w->dict);
	return 0;
}

static void wrapped_dealloc(Wrapped *w)
{
	PyObject_GC_UnTrack(w);
	wrapped_clear(w);
	PyObject_GC_Del(w);
}

static PyGetSetDef wrapped_getset[] = {
	{ "__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject WrappedType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof._Wrapped",
	.tp_basicsize = sizeof(Wrapped),
	.tp_dealloc = (destructor)wrapped_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
		    Py_TPFLAGS_METHOD_DESCRIPTOR,
	.tp_vectorcall_offset = offsetof(Wrapped, vc),
	.tp_call = PyVectorcall_Call,
	.tp_descr_get = wrapped_get,
	.tp_dictoffset = offsetof(Wrapped, dict),
	.tp_getset = wrapped_getset,
	.tp_traverse = (traverseproc)wrapped_traverse,
	.tp_clear = (inquiry)wrapped_clear,
};

static PyObject *mod_wrap(PyObject *m, PyObject *args)
{
	PyObject *s, *fn;
	Wrapped *w;

	(void)m;
	if (!PyArg_ParseTuple(args, "O!O:_wrap", &SpanType, &s, &fn))
		return NULL;
	w = PyObject_GC_New(Wrapped, &WrappedType);
	if (w == NULL)
		return NULL;
	w->id = ((Span *)s)->id;
	w->span = Py_NewRef(s);
	w->fn = Py_NewRef(fn);
	w->dict = NULL;
	w->vc = wrapped_vcall;
	PyObject_GC_Track(w);
	return (PyObject *)w;
}

/* ---- a do-nothing C context manager: the benchmark's floor ---- */

typedef struct {
	PyObject_HEAD
} Null;

static PyObject *null_enter(PyObject *s, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(s);
}

static PyObject *null_exit(PyObject *s, PyObject *const *args, Py_ssize_t n)
{
	(void)s;
	(void)args;
	(void)n;
	Py_RETURN_FALSE;
}

static PyMethodDef null_methods[] = {
	{ "__enter__", (PyCFunction)null_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)(void (*)(void))null_exit, METH_FASTCALL, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyTypeObject NullType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof.nullcontext",
	.tp_doc = "a C context manager that does nothing (the cost floor of `with`)",
	.tp_basicsize = sizeof(Null),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_methods = null_methods,
};

/* ---- request ---- */

typedef struct {
	PyObject_HEAD uint32_t id;
	Node *node; /* while open */
	uint64_t track; /* since it was opened (marks after its end name it too) */
	PyObject *token, *prev;
	PyObject *name;
} Request;

static int request_init(Request *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "category", NULL };
	PyObject *name = NULL, *cat = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|UU:request", kwlist, &name, &cat))
		return -1;
	if (name == NULL)
		name = PyUnicode_FromString("request");
	else
		Py_INCREF(name);
	if (name == NULL)
		return -1;
	Py_XSETREF(r->name, name);
	if (!g_off) {
		const char *n = PyUnicode_AsUTF8(name),
			   *c = cat ? PyUnicode_AsUTF8(cat) : "REQUEST";
		if (n == NULL || c == NULL)
			return -1;
		r->id = rp_intern(n, c, NULL, 0);
	}
	return 0;
}

static void request_dealloc(Request *r)
{
	Py_XDECREF(r->node);
	Py_XDECREF(r->token);
	Py_XDECREF(r->prev);
	Py_XDECREF(r->name);
	Py_TYPE(r)->tp_free(r);
}

static int request_open(Request *r)
{
	if (g_off)
		return 0;
	if (r->node != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "ringprof.request: already open");
		return -1;
	}
	if (PyContextVar_Get(g_current, NULL, &r->prev) < 0)
		return -1;
	g_requests = 1;
	r->node = node_new(NULL, r->id);
	if (r->node == NULL)
		return -1;
	r->track = r->node->track;
	rp_child_begin(r->id, r->node->track, 0, 1);
	r->token = PyContextVar_Set(g_current, (PyObject *)r->node);
	return r->token ? 0 : -1;
}

static int request_close(Request *r, bool error)
{
	int rc = 0;

	if (g_off || r->node == NULL)
		return 0;
	rp_emit(RP_EV_CHILD_END, error || r->node->error ? RP_SPAN_ERROR : 0, r->id,
		r->node->track, 1);
	if (PyContextVar_Reset(g_current, r->token) < 0) {
		/* Left in another context (an async generator): put back what was. */
		PyErr_Clear();
		rc = set_current(r->prev == Py_None ? NULL : r->prev);
	}
	Py_CLEAR(r->node);
	Py_CLEAR(r->token);
	Py_CLEAR(r->prev);
	return rc;
}

static PyObject *request_enter_m(Request *r, PyObject *unused)
{
	(void)unused;
	return request_open(r) < 0 ? NULL : Py_NewRef(r);
}

static PyObject *request_exit_m(Request *r, PyObject *const *args, Py_ssize_t n)
{
	if (request_close(r, exc_given(args, n)) < 0)
		return NULL;
	Py_RETURN_FALSE;
}

static PyObject *request_aenter_m(Request *r, PyObject *unused)
{
	(void)unused;
	return request_open(r) < 0 ? NULL : done_new((PyObject *)r);
}

static PyObject *request_aexit_m(Request *r, PyObject *const *args, Py_ssize_t n)
{
	return request_close(r, exc_given(args, n)) < 0 ? NULL : done_new(Py_False);
}

static PyObject *request_get_track(Request *r, void *unused)
{
	(void)unused;
	if (r->node == NULL)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(r->node->track);
}

/* request.error(): the request ends in error when it closes. */
static PyObject *request_error_m(Request *r, PyObject *unused)
{
	(void)unused;
	if (r->node != NULL)
		r->node->error = 1;
	Py_RETURN_NONE;
}

static PyObject *mark_track(PyObject *name, uint64_t track);

/* request.mark(name): a milestone of this request (docs/python.md). */
static PyObject *request_mark_m(Request *r, PyObject *name)
{
	return mark_track(name, r->track);
}

static PyMethodDef request_methods[] = {
	{ "error", (PyCFunction)request_error_m, METH_NOARGS,
	  "error(): the request ends in error" },
	{ "mark", (PyCFunction)request_mark_m, METH_O,
	  "mark(name): the time from the request's start to now, as milestone `name` "
	  "(first_token, queue_wait): once per request and name" },
	{ "__enter__", (PyCFunction)request_enter_m, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)(void (*)(void))request_exit_m, METH_FASTCALL, NULL },
	{ "__aenter__", (PyCFunction)request_aenter_m, METH_NOARGS, NULL },
	{ "__aexit__", (PyCFunction)(void (*)(void))request_aexit_m, METH_FASTCALL, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef request_getset[] = {
	{ "track", (getter)request_get_track, NULL, "the request's track id while open", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject RequestType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ringprof.request",
	.tp_doc = "request(name='request', category='REQUEST'): a request's root span",
	.tp_basicsize = sizeof(Request),
	.tp_dealloc = (destructor)request_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)request_init,
	.tp_methods = request_methods,
	.tp_getset = request_getset,
};

/* The track of @req, a ringprof.request (opened: else 0, which the engine counts as
 * an orphan); -1 with TypeError otherwise. */
static int charge_track(PyObject *req, uint64_t *track)
{
	if (!PyObject_TypeCheck(req, &RequestType)) {
		PyErr_SetString(PyExc_TypeError, "charge(req): req is a ringprof.request");
		return -1;
	}
	*track = ((Request *)req)->track;
	return 0;
}

/* ringprof.charge(req): the innermost open span of the current context (the node the
 * context holds, else the thread's innermost span, whatever its name) served @req. */
static PyObject *mod_charge(PyObject *m, PyObject *req)
{
	Node *cur = NULL;
	uint64_t track;

	(void)m;
	if (charge_track(req, &track) < 0)
		return NULL;
	if (g_off)
		Py_RETURN_NONE;
	if (g_requests && current(&cur) < 0)
		return NULL;
	if (cur != NULL)
		rp_charge(cur->name, cur->track, track);
	else
		rp_charge_innermost(0, track);
	Py_XDECREF(cur);
	Py_RETURN_NONE;
}

/* ---- counters, instants, status ---- */

/* The id of @name in category @cat, interned once (@cache: name -> id). */
static int cached_id(PyObject *cache, PyObject *name, const char *cat, uint32_t *id)
{
	PyObject *v;

	if (!PyUnicode_Check(name)) {
		PyErr_SetString(PyExc_TypeError, "a name must be a str");
		return -1;
	}
	v = PyDict_GetItemWithError(cache, name);
	if (v != NULL) {
		*id = (uint32_t)PyLong_AsUnsignedLong(v);
		return 0;
	}
	if (PyErr_Occurred() || (*id = intern_obj(name, NULL, cat)) == UINT32_MAX)
		return -1;
	v = PyLong_FromUnsignedLong(*id);
	if (v == NULL || PyDict_SetItem(cache, name, v) < 0) {
		Py_XDECREF(v);
		return -1;
	}
	Py_DECREF(v);
	return 0;
}

static int name_id(PyObject *name, uint32_t *id)
{
	return cached_id(g_names, name, "", id);
}

/*
 * A milestone of the request on @track (rp_async_mark(): the engine records the time
 * from the request's start to now under @name). Milestone names are interned in
 * category "milestone", apart from spans of the same text. Track 0 (no request) or a
 * request that ended: the engine counts it (mark_unmatched), records nothing.
 */
static PyObject *mark_track(PyObject *name, uint64_t track)
{
	uint32_t id;

	if (g_off)
		Py_RETURN_NONE;
	if (cached_id(g_marks, name, "milestone", &id) < 0)
		return NULL;
	rp_async_mark(id, track);
	Py_RETURN_NONE;
}

/* mark(name): a milestone of the current request (the context's), if any. */
static PyObject *mod_mark(PyObject *m, PyObject *name)
{
	Node *cur = NULL;
	uint64_t track = 0;
	PyObject *r;

	(void)m;
	if (g_off)
		Py_RETURN_NONE;
	if (g_requests && current(&cur) < 0)
		return NULL;
	/* a task's own track is not a request: nothing to mark there */
	if (cur != NULL && !(cur->root ? cur->root : cur)->task)
		track = cur->track;
	Py_XDECREF(cur);
	r = mark_track(name, track);
	return r;
}

/* _in_request(): whether the context has a request open (a task's own track is none). */
static PyObject *mod_in_request(PyObject *m, PyObject *unused)
{
	Node *cur = NULL;
	int in;

	(void)m;
	(void)unused;
	if (g_off || !g_requests)
		Py_RETURN_FALSE;
	if (current(&cur) < 0)
		return NULL;
	in = cur != NULL && !(cur->root ? cur->root : cur)->task;
	Py_XDECREF(cur);
	return PyBool_FromLong(in);
}

/*
 * _request_span(): (track, parent, span) for a span to open in the context's request:
 * its track, the innermost open span there and a new span id of the track; None
 * outside a request (ringprof.nat nests an agent's steps under it).
 */
static PyObject *mod_request_span(PyObject *m, PyObject *unused)
{
	Node *cur = NULL, *root;
	PyObject *r;

	(void)m;
	(void)unused;
	if (g_off || !g_requests)
		Py_RETURN_NONE;
	if (current(&cur) < 0)
		return NULL;
	if (cur == NULL)
		Py_RETURN_NONE;
	root = cur->root ? cur->root : cur;
	if (root->task) {
		Py_DECREF(cur);
		Py_RETURN_NONE;
	}
	r = Py_BuildValue("KkI", (unsigned long long)cur->track, (unsigned long)cur->span,
			  (unsigned int)++root->next); /* under the GIL */
	Py_DECREF(cur);
	return r;
}

static PyObject *mod_counter(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
	uint32_t id;
	long long v;

	(void)m;
	if (n != 2) {
		PyErr_SetString(PyExc_TypeError, "counter(name, value)");
		return NULL;
	}
	if (g_off)
		Py_RETURN_NONE;
	v = PyLong_AsLongLong(args[1]);
	if ((v == -1 && PyErr_Occurred()) || name_id(args[0], &id) < 0)
		return NULL;
	rp_counter(id, v);
	Py_RETURN_NONE;
}

static PyObject *mod_instant(PyObject *m, PyObject *name)
{
	uint32_t id;

	(void)m;
	if (g_off)
		Py_RETURN_NONE;
	if (name_id(name, &id) < 0)
		return NULL;
	rp_instant(id);
	Py_RETURN_NONE;
}

/*
 * link(name, correlation, side="launch", span=0): rp_link() from Python, the C API's
 * semantics (docs/device.md): both sides record the same correlation id, the launch
 * side inside the span that launched the work, the device side inside (or, with
 * span, naming) the span of the work it caused.
 */
static PyObject *mod_link(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "name", "correlation", "side", "span", NULL };
	PyObject *name;
	unsigned long long corr, span = 0;
	const char *side = "launch";
	uint8_t flag;
	uint32_t id;

	(void)m;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OK|sK:link", kwlist, &name, &corr, &side,
					 &span))
		return NULL;
	if (strcmp(side, "launch") == 0) {
		flag = RP_LINK_LAUNCH;
	} else if (strcmp(side, "device") == 0) {
		flag = RP_LINK_DEVICE;
	} else {
		PyErr_SetString(PyExc_ValueError, "link: side is 'launch' or 'device'");
		return NULL;
	}
	if (g_off)
		Py_RETURN_NONE;
	if (name_id(name, &id) < 0)
		return NULL;
	rp_link(id, flag, span, corr);
	Py_RETURN_NONE;
}

static PyObject *mod_dropped(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyLong_FromUnsignedLongLong(g_off ? 0 : rp_dropped());
}

static PyObject *mod_enabled(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyBool_FromLong(!g_off);
}

/* ---- the profile hook ---- */

/*
 * trace_calls(include=, exclude=): fnmatch(3) patterns matched against a code object's
 * file name and its qualified name, once, when the code object is first seen (its id is
 * kept in the code object). A code object excluded, or not included when there are
 * includes, gets RP_PY_SKIP: its calls are not recorded, its callees are (under the
 * nearest recorded caller).
 */
#define RP_PY_SKIP UINT32_MAX
#define RP_PY_PATTERNS 32
static char *g_incl[RP_PY_PATTERNS], *g_excl[RP_PY_PATTERNS];
static int g_nincl, g_nexcl;

static int any_match(char *const *pat, int n, const char *file, const char *q)
{
	for (int i = 0; i < n; i++)
		if (fnmatch(pat[i], file, 0) == 0 || fnmatch(pat[i], q, 0) == 0)
			return 1;
	return 0;
}

/* Once per code object: cProfile's key, (file, first line, name). */
static __attribute__((noinline)) uint32_t code_id_slow(PyCodeObject *co)
{
	const char *q = PyUnicode_AsUTF8(co->co_qualname);
	const char *file = PyUnicode_AsUTF8(co->co_filename);
	uint32_t id = 0;

	if (q != NULL && file != NULL) {
		if ((g_nincl > 0 && !any_match(g_incl, g_nincl, file, q)) ||
		    any_match(g_excl, g_nexcl, file, q))
			id = RP_PY_SKIP;
		else
			id = rp_intern(q, "python", file, (uint32_t)co->co_firstlineno);
	} else {
		PyErr_Clear();
	}
	_PyCode_SetExtra((PyObject *)co, g_extra, (void *)((uintptr_t)id + 1));
	return id;
}

#ifdef RP_PY311
static inline uint32_t code_id_co(PyCodeObject *co)
{
	rp_code_extra *x = co->co_extra;

	if (RP_LIKELY(x != NULL && g_extra < x->ce_size && x->ce_extras[g_extra] != NULL))
		return (uint32_t)((uintptr_t)x->ce_extras[g_extra] - 1);
	return code_id_slow(co);
}
#endif

static inline uint32_t code_id(PyFrameObject *f)
{
#ifdef RP_PY311
	return code_id_co(f->f_frame->f_code);
#else
	PyCodeObject *co = PyFrame_GetCode(f);
	void *x = NULL;
	uint32_t id;

	if (_PyCode_GetExtra((PyObject *)co, g_extra, &x) == 0 && x != NULL)
		id = (uint32_t)((uintptr_t)x - 1);
	else
		id = code_id_slow(co);
	Py_DECREF(co);
	return id;
#endif
}

/* C functions: a small open-addressing map from the PyMethodDef to the id. */
#define CF_SLOTS 8192u
static struct {
	const void *key;
	uint32_t id;
} g_cf[CF_SLOTS];

static uint32_t cfunc_id(PyObject *fn)
{
	const PyMethodDef *ml;
	const char *owner = NULL;
	char buf[256];
	uint32_t i;

	if (PyCFunction_Check(fn)) {
		ml = ((PyCFunctionObject *)fn)->m_ml;
		PyObject *self = PyCFunction_GET_SELF(fn);
		if (self != NULL && !PyModule_Check(self))
			owner = Py_TYPE(self)->tp_name;
	} else {
		ml = ((PyMethodDescrObject *)fn)->d_method;
		owner = PyDescr_TYPE(fn)->tp_name;
	}
	i = (uint32_t)(((uintptr_t)ml >> 4) * 2654435761u) & (CF_SLOTS - 1);
	for (uint32_t n = 0; n < CF_SLOTS; n++, i = (i + 1) & (CF_SLOTS - 1)) {
		if (g_cf[i].key == ml)
			return g_cf[i].id;
		if (g_cf[i].key == NULL)
			break;
	}
	if (owner)
		snprintf(buf, sizeof(buf), "<built-in method %s of %s object>", ml->ml_name, owner);
	else
		snprintf(buf, sizeof(buf), "<built-in method %s>", ml->ml_name);
	uint32_t id = rp_intern(buf, "python", "~", 0);
	if (g_cf[i].key == NULL) { /* else the map is full: intern again next time */
		g_cf[i].key = ml;
		g_cf[i].id = id;
	}
	return id;
}

static int is_cfunc(PyObject *a)
{
	return a != NULL && (PyCFunction_Check(a) || Py_IS_TYPE(a, &PyMethodDescr_Type));
}

/*
 * The traced frames open on this thread, innermost last: a RETURN of a frame that
 * was running when tracing began has no CALL and is not recorded (as cProfile
 * does), and trace_calls(False) closes the frames still open.
 */
#define TSTACK 256
static __thread uint32_t t_stack[TSTACK];
static __thread uint32_t t_depth;

static inline void traced_begin(uint32_t id)
{
	if (t_depth < TSTACK)
		t_stack[t_depth] = id;
	t_depth++;
	rp_begin(id);
}

static inline void traced_end(uint32_t id)
{
	if (t_depth == 0)
		return;
	t_depth--;
	rp_end(id);
}

static int prof_hook(PyObject *obj, PyFrameObject *f, int what, PyObject *arg)
{
	uint32_t id;

	(void)obj;
	switch (what) {
	case PyTrace_CALL:
		if ((id = code_id(f)) != RP_PY_SKIP)
			traced_begin(id);
		break;
	case PyTrace_RETURN:
		if ((id = code_id(f)) != RP_PY_SKIP)
			traced_end(id);
		break;
	case PyTrace_C_CALL:
		if (g_builtins && is_cfunc(arg))
			traced_begin(cfunc_id(arg));
		break;
	case PyTrace_C_RETURN:
	case PyTrace_C_EXCEPTION:
		if (g_builtins && is_cfunc(arg))
			traced_end(cfunc_id(arg));
		break;
	}
	return 0;
}

static void traced_close_all(void)
{
	while (t_depth > 0) {
		t_depth--;
		if (t_depth < TSTACK)
			rp_end(t_stack[t_depth]);
	}
}

/*
 * The frame-evaluation hook (PEP 523; CPython 3.11): the same BEGIN/END per Python
 * call and per generator or coroutine resumption as the profile hook, without what
 * the profile hook makes CPython pay on every event for every profiler alike (a
 * frame object, its line number, the tracing dispatch of every instruction): the
 * wrapped evaluation of each frame, on threads whose t_traced is set. A BEGIN is
 * always followed by its END, even after tracing stopped. The hook it replaced
 * (another tool's) is called in its place and put back at the end.
 */
/* Bit 0: this thread is traced; the bits above: module bodies of imports executing
 * on it (eval_import). One thread-local word, read once per frame. */
static __thread uint32_t t_traced;
#define T_TRACED 1u
#define T_IMPORT 2u
static int g_hook; /* 1: the profile hook; 2: the evaluation hook */
#ifdef RP_PY311
static _PyFrameEvalFunction g_prev_eval;

/*
 * Import time. Importing a big library (torch, fastapi) runs thousands of short
 * functions once each: as spans they would fill the thread's ring and hold the
 * engine's per-name slots that the program's own hot functions need later. Every
 * call made while a module other than __main__ executes its body on this thread is
 * therefore a summarized span (rp_sum_begin/rp_sum_end, docs/summaries.md): calls and
 * times stay exact, calls shorter than the summary threshold fold into per-context
 * summaries at the source, longer ones stay spans. The threshold is set for processes
 * that trace from the start (RINGPROF_PYTHON=trace, python -m ringprof); elsewhere
 * rp_sum_* write ordinary spans. Later calls of the same functions are ordinary spans.
 */

/* A module body run by an import: its __name__ is a str other than "__main__" (the
 * program's own body, also under runpy and python -m ringprof, stays ordinary). */
static int is_import(struct _PyInterpreterFrame *f)
{
	PyObject *n;

	if (f->f_globals == NULL || !PyDict_CheckExact(f->f_globals))
		return 0;
	n = PyDict_GetItemWithError(f->f_globals, g_str_name);
	if (n == NULL) {
		PyErr_Clear();
		return 0;
	}
	return PyUnicode_Check(n) && PyUnicode_Compare(n, g_str_main) != 0;
}

static PyObject *eval_import(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag,
			     uint32_t id)
{
	/* This C frame orders the levels for the summary shadow (rp_left_frame): a
	 * nested evaluation's frame is deeper, and Python unwinds by returning here. */
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	PyObject *r;

	uint8_t was = rp_thread_state.imp;

	t_traced += T_IMPORT;
	rp_thread_state.imp = 1; /* its summaries say import time (RP_SUMMARY_IMPORT) */
	rp_sum_begin(id, frame, 0);
	r = g_prev_eval(ts, f, throwflag);
	rp_sum_end(id, frame);
	rp_thread_state.imp = was;
	t_traced -= T_IMPORT;
	return r;
}

static PyObject *eval_hook(PyThreadState *ts, struct _PyInterpreterFrame *f, int throwflag)
{
	uint32_t id, tr = t_traced;
	PyObject *r;

	if (!(tr & T_TRACED))
		return g_prev_eval(ts, f, throwflag);
	/* Calling a generator or coroutine function only makes the object (its
	 * RETURN_GENERATOR): cProfile sees no call there, only the resumptions. */
	if ((f->f_code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) &&
	    f->prev_instr == _PyCode_CODE(f->f_code) - 1)
		return g_prev_eval(ts, f, throwflag);
	id = code_id_co(f->f_code);
	if (id == RP_PY_SKIP)
		return g_prev_eval(ts, f, throwflag);
	/* Module-level code runs with its globals as its locals (functions have none). */
	if (RP_UNLIKELY(tr >= T_IMPORT || (f->f_locals == f->f_globals && is_import(f))))
		return eval_import(ts, f, throwflag, id);
	rp_begin(id);
	r = g_prev_eval(ts, f, throwflag);
	rp_end(id);
	return r;
}

static void eval_install(int on)
{
	PyInterpreterState *in = PyInterpreterState_Get();

	if (on && _PyInterpreterState_GetEvalFrameFunc(in) != eval_hook) {
		g_prev_eval = _PyInterpreterState_GetEvalFrameFunc(in);
		_PyInterpreterState_SetEvalFrameFunc(in, eval_hook);
	} else if (!on && _PyInterpreterState_GetEvalFrameFunc(in) == eval_hook) {
		_PyInterpreterState_SetEvalFrameFunc(in, g_prev_eval);
	}
}
#endif

/* threading.setprofile()'s hook in a new thread: start tracing there, once. */
static PyObject *mod_thread_hook(PyObject *m, PyObject *const *args, Py_ssize_t n)
{
	(void)m;
	if (n != 3 || !PyFrame_Check(args[0])) {
		PyErr_SetString(PyExc_TypeError, "_thread_hook(frame, event, arg)");
		return NULL;
	}
	if (g_hook == 2) {
		PyEval_SetProfile(NULL, NULL); /* the evaluation hook does the work */
		t_traced |= T_TRACED;
		Py_RETURN_NONE;
	}
	PyEval_SetProfile(prof_hook, NULL);
	if (PyUnicode_CompareWithASCIIString(args[1], "call") == 0)
		prof_hook(NULL, (PyFrameObject *)args[0], PyTrace_CALL, NULL);
	Py_RETURN_NONE;
}

/* A sequence of str into (malloc'd) patterns; the old ones are freed once the new are read. */
static int set_patterns(PyObject *seq, char **pat, int *n)
{
	char *tmp[RP_PY_PATTERNS];
	PyObject *f;
	Py_ssize_t len;
	int k = 0;

	if (seq == NULL || seq == Py_None)
		return 0;
	if (PyUnicode_Check(seq)) { /* not its characters */
		PyErr_SetString(PyExc_TypeError, "trace_calls: include/exclude is a list of str");
		return -1;
	}
	f = PySequence_Fast(seq, "trace_calls: include/exclude is a sequence of str");
	if (f == NULL)
		return -1;
	len = PySequence_Fast_GET_SIZE(f);
	if (len > RP_PY_PATTERNS) {
		PyErr_Format(PyExc_ValueError, "trace_calls: at most %d patterns", RP_PY_PATTERNS);
		goto fail;
	}
	for (; k < len; k++) {
		const char *c = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(f, k));

		if (c == NULL || (tmp[k] = strdup(c)) == NULL) {
			if (c != NULL)
				PyErr_NoMemory();
			goto fail;
		}
	}
	Py_DECREF(f);
	for (int i = 0; i < *n; i++)
		free(pat[i]);
	memcpy(pat, tmp, sizeof(*tmp) * (size_t)k);
	*n = k;
	return 0;
fail:
	while (k-- > 0)
		free(tmp[k]);
	Py_DECREF(f);
	return -1;
}

static PyObject *mod_trace_calls(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "enabled", "builtins", "hook", "include", "exclude", NULL };
	int on = 1, builtins = 0;
	const char *how = "auto";
	PyObject *hook, *r, *incl = NULL, *excl = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|ppsOO:trace_calls", kwlist, &on, &builtins,
					 &how, &incl, &excl))
		return NULL;
	if (strcmp(how, "auto") != 0 && strcmp(how, "profile") != 0 && strcmp(how, "eval") != 0) {
		PyErr_SetString(PyExc_ValueError,
				"trace_calls: hook is 'auto', 'profile' or 'eval'");
		return NULL;
	}
	if (set_patterns(incl, g_incl, &g_nincl) < 0 || set_patterns(excl, g_excl, &g_nexcl) < 0)
		return NULL;
	if (g_off)
		Py_RETURN_NONE;
	if (g_hook == 1) { /* stop what runs, whatever comes next */
		PyEval_SetProfile(NULL, NULL);
		traced_close_all();
	}
	t_traced &= ~T_TRACED;
#ifdef RP_PY311
	eval_install(0);
#endif
	g_hook = 0;
	if (on) {
		g_builtins = builtins;
		g_hook = 1;
#ifdef RP_PY311
		/* C functions are seen by the profile hook only. */
		if (strcmp(how, "profile") != 0 && !builtins)
			g_hook = 2;
#else
		if (strcmp(how, "eval") == 0) {
			PyErr_SetString(PyExc_ValueError,
					"trace_calls: hook='eval' needs CPython 3.11");
			return NULL;
		}
#endif
		if (g_hook == 1) {
			PyEval_SetProfile(prof_hook, NULL);
		} else {
#ifdef RP_PY311
			eval_install(1);
			t_traced |= T_TRACED;
#endif
		}
	}
	hook = on ? PyObject_GetAttrString(m, "_thread_hook") : Py_NewRef(Py_None);
	if (hook == NULL)
		return NULL;
	r = PyObject_CallOneArg(g_threading_setprofile, hook);
	Py_DECREF(hook);
	if (r == NULL)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_NONE;
}

/* ---- module ---- */

static PyObject *mod_set_decorator(PyObject *m, PyObject *fn)
{
	(void)m;
	Py_XSETREF(g_decorate, Py_NewRef(fn));
	Py_RETURN_NONE;
}

static PyObject *mod_next_track(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyLong_FromUnsignedLongLong(++g_next_track);
}

/* _emit(kind, name_id, track, arg, ts_ns): one raw event, ts in CLOCK_MONOTONIC ns
 * (None: now). For bridges that replay events with their own time (ringprof.nat). */
static PyObject *mod_emit(PyObject *m, PyObject *args)
{
	unsigned int kind, name;
	unsigned long long track, arg;
	PyObject *ts_obj;
	const struct rp_wire_clock *c;

	(void)m;
	if (!PyArg_ParseTuple(args, "IIKKO:_emit", &kind, &name, &track, &arg, &ts_obj))
		return NULL;
	if (g_off)
		Py_RETURN_NONE;
	if (kind == 0 || kind > RP_EV_KIND_MAX) {
		PyErr_SetString(PyExc_ValueError, "_emit: unknown event kind");
		return NULL;
	}
	if (ts_obj == Py_None) {
		rp_emit((uint8_t)kind, 0, name, track, arg);
		Py_RETURN_NONE;
	}
	unsigned long long ns = PyLong_AsUnsignedLongLong(ts_obj);
	if (ns == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	c = rp_clock();
	if (c == NULL)
		Py_RETURN_NONE;
	/* ns -> ticks: the inverse of rp_ticks_to_ns() (exact for the monotonic clock). */
	__extension__ __int128 d = (__extension__(__int128)(int64_t)(ns - c->ref_ns)) << c->shift;
	uint64_t ticks = c->ref_ticks + (uint64_t)(int64_t)(d / (__int128)c->mult);
	rp_emit_at(ticks, (uint8_t)kind, 0, name, track, arg);
	Py_RETURN_NONE;
}

/* _intern(name, category, file, line) -> id */
static PyObject *mod_intern(PyObject *m, PyObject *args)
{
	const char *n, *c = "", *f = NULL;
	unsigned int line = 0;

	(void)m;
	if (!PyArg_ParseTuple(args, "s|szI:_intern", &n, &c, &f, &line))
		return NULL;
	return PyLong_FromUnsignedLong(g_off ? 0 : rp_intern(n, c, f, line));
}

/* _clock() -> (realtime_ns - monotonic_ns) at segment creation, or None when off. */
static PyObject *mod_segment(PyObject *m, PyObject *unused)
{
	const char *p = g_off ? NULL : rp_segment_path();

	(void)m;
	(void)unused;
	if (p == NULL)
		Py_RETURN_NONE;
	return PyUnicode_FromString(p);
}

static PyMethodDef mod_methods[] = {
	{ "counter", (PyCFunction)(void (*)(void))mod_counter, METH_FASTCALL,
	  "counter(name, value): a counter sample" },
	{ "instant", mod_instant, METH_O, "instant(name): a point in time" },
	{ "mark", mod_mark, METH_O,
	  "mark(name): request.mark(name) of the current request (the context's)" },
	{ "link", (PyCFunction)(void (*)(void))mod_link, METH_VARARGS | METH_KEYWORDS,
	  "link(name, correlation, side='launch', span=0): rp_link() (docs/device.md)" },
	{ "charge", mod_charge, METH_O,
	  "charge(req): the innermost open span here (the batch's forward) served request "
	  "`req`: its time is split between the requests charged to it (rp_charge)" },
	{ "dropped", mod_dropped, METH_NOARGS, "events this process could not record" },
	{ "enabled", mod_enabled, METH_NOARGS, "whether events are recorded" },
	{ "trace_calls", (PyCFunction)(void (*)(void))mod_trace_calls, METH_VARARGS | METH_KEYWORDS,
	  "trace_calls(enabled=True, builtins=False, hook='auto'): every Python call on this "
	  "thread and on threads started while on" },
	{ "_thread_hook", (PyCFunction)(void (*)(void))mod_thread_hook, METH_FASTCALL, NULL },
	{ "_wrap", mod_wrap, METH_VARARGS, NULL },
	{ "_set_decorator", mod_set_decorator, METH_O, NULL },
	{ "_next_track", mod_next_track, METH_NOARGS, NULL },
	{ "_emit", mod_emit, METH_VARARGS, NULL },
	{ "_intern", mod_intern, METH_VARARGS, NULL },
	{ "_in_request", mod_in_request, METH_NOARGS, NULL },
	{ "_request_span", mod_request_span, METH_NOARGS, NULL },
	{ "segment_path", mod_segment, METH_NOARGS, "this process's segment name, or None" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "ringprof._ringprof",
	.m_doc = "ringprof's CPython producer (C); use the `ringprof` package",
	.m_size = -1,
	.m_methods = mod_methods,
};

static int add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	return name ? PyModule_AddObjectRef(m, name, (PyObject *)t) : 0;
}

PyMODINIT_FUNC PyInit__ringprof(void)
{
	PyObject *m = PyModule_Create(&moddef), *th;

	if (m == NULL)
		return NULL;
	if (add_type(m, &NodeType, NULL) < 0 || add_type(m, &DoneType, NULL) < 0 ||
	    add_type(m, &SpanType, "span") < 0 || add_type(m, &WrappedType, NULL) < 0 ||
	    add_type(m, &NullType, "nullcontext") < 0 || add_type(m, &RequestType, "request") < 0)
		goto fail;
	/* Tracing from the start: import-time calls fold (eval_import) below 10 ms, the
	 * summaries' adaptive ceiling: an import runs once, its calls need no percentiles,
	 * and every module body shorter than that folds too, instead of taking a name's
	 * sketch and window slots (import torch: 341 names with spans instead of 1,311).
	 * Pending levels hold the engine's merge back at most until the next periodic
	 * flush (100 ms). RINGPROF_SUMMARY_NS overrides it, 0 turns folding off. */
	if (getenv("RINGPROF_PYTHON") != NULL && strcmp(getenv("RINGPROF_PYTHON"), "trace") == 0)
		rp_summary_default_ns = 10000000;
	g_off = rp_init() != 0;
	g_str_name = PyUnicode_InternFromString("__name__");
	g_str_main = PyUnicode_InternFromString("__main__");
	if (g_str_name == NULL || g_str_main == NULL)
		goto fail;
	g_current = PyContextVar_New("ringprof.current", Py_None);
	g_names = PyDict_New();
	g_marks = PyDict_New();
	g_extra = _PyEval_RequestCodeExtraIndex(NULL);
	th = PyImport_ImportModule("threading");
	if (g_current == NULL || g_names == NULL || g_marks == NULL || g_extra < 0 || th == NULL)
		goto fail;
	g_threading_setprofile = PyObject_GetAttrString(th, "setprofile");
	Py_DECREF(th);
	if (g_threading_setprofile == NULL)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
