//! CPython's names for Python 2 globals: what `pickle.Unpickler.find_class` reads a global as
//! when the pickle's protocol is below 3 (`fix_imports`, on by default), from the tables of
//! CPython's `Lib/_compat_pickle.py` (`NAME_MAPPING` first, else the module through
//! `IMPORT_MAPPING`). The tables are those of CPython 3.11 plus
//! `exceptions.TargetScopeError`, which CPython's main branch adds to `PYTHON2_EXCEPTIONS`;
//! `tests/canonical.rs` compares them with the running CPython's.
//!
//! Policies never apply this mapping (they name globals as written, `crate::policy`); the
//! canonical writer does, because its output is protocol 5, at which CPython maps nothing.

/// The (module, name) CPython 3 resolves the global `module.name` to when a pickle of protocol
/// 0, 1 or 2 names it (itself when no table names it): `("__builtin__", "set")` gives
/// `("builtins", "set")`, `("__builtin__", "unicode")` `("builtins", "str")`,
/// `("exceptions", "StandardError")` `("builtins", "Exception")`.
///
/// ```
/// use picklewarden::canonical::python3_name;
/// assert_eq!(python3_name("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"));
/// assert_eq!(python3_name("collections", "OrderedDict"), ("collections", "OrderedDict"));
/// ```
pub fn python3_name<'n>(module: &'n str, name: &'n str) -> (&'n str, &'n str) {
    if let Ok(i) = NAME_MAPPING.binary_search_by(|(k, _)| k.cmp(&(module, name))) {
        if let Some(&(_, to)) = NAME_MAPPING.get(i) {
            return to;
        }
    }
    match IMPORT_MAPPING.binary_search_by(|(k, _)| k.cmp(&module)) {
        Ok(i) => IMPORT_MAPPING
            .get(i)
            .map_or((module, name), |&(_, m)| (m, name)),
        Err(_) => (module, name),
    }
}

/// The (module, name) CPython's pickler writes the global `module.name` under at protocol 0, 1
/// or 2 (`Pickler.save_global` with `fix_imports`, on by default, in CPython's
/// `Lib/pickle.py`): `REVERSE_NAME_MAPPING` first, else the module through
/// `REVERSE_IMPORT_MAPPING` (CPython's `Lib/_compat_pickle.py`, with the main branch's
/// `exceptions.TargetScopeError`), else itself.
///
/// The mapping can lose the class: `builtins.FileNotFoundError` is written as
/// `exceptions.OSError`, which [`python3_name`] reads back as `builtins.OSError`.
///
/// ```
/// use picklewarden::canonical::python2_name;
/// assert_eq!(python2_name("builtins", "set"), ("__builtin__", "set"));
/// assert_eq!(python2_name("builtins", "str"), ("__builtin__", "unicode"));
/// assert_eq!(python2_name("mitogen.core", "Blob"), ("mitogen.core", "Blob"));
/// ```
pub fn python2_name<'n>(module: &'n str, name: &'n str) -> (&'n str, &'n str) {
    if let Ok(i) = REVERSE_NAME_MAPPING.binary_search_by(|(k, _)| k.cmp(&(module, name))) {
        if let Some(&(_, to)) = REVERSE_NAME_MAPPING.get(i) {
            return to;
        }
    }
    match REVERSE_IMPORT_MAPPING.binary_search_by(|(k, _)| k.cmp(&module)) {
        Ok(i) => REVERSE_IMPORT_MAPPING
            .get(i)
            .map_or((module, name), |&(_, m)| (m, name)),
        Err(_) => (module, name),
    }
}

/// A global's (module, name).
type Name = (&'static str, &'static str);

/// `IMPORT_MAPPING`: Python 2 module -> Python 3 module, sorted by the Python 2 name.
const IMPORT_MAPPING: &[(&str, &str)] = &[
    ("BaseHTTPServer", "http.server"),
    ("CGIHTTPServer", "http.server"),
    ("ConfigParser", "configparser"),
    ("Cookie", "http.cookies"),
    ("Dialog", "tkinter.dialog"),
    ("DocXMLRPCServer", "xmlrpc.server"),
    ("FileDialog", "tkinter.filedialog"),
    ("HTMLParser", "html.parser"),
    ("Queue", "queue"),
    ("ScrolledText", "tkinter.scrolledtext"),
    ("SimpleDialog", "tkinter.simpledialog"),
    ("SimpleHTTPServer", "http.server"),
    ("SimpleXMLRPCServer", "xmlrpc.server"),
    ("SocketServer", "socketserver"),
    ("StringIO", "io"),
    ("Tix", "tkinter.tix"),
    ("Tkconstants", "tkinter.constants"),
    ("Tkdnd", "tkinter.dnd"),
    ("Tkinter", "tkinter"),
    ("UserDict", "collections"),
    ("UserList", "collections"),
    ("UserString", "collections"),
    ("__builtin__", "builtins"),
    ("_abcoll", "collections.abc"),
    ("_elementtree", "xml.etree.ElementTree"),
    ("_winreg", "winreg"),
    ("anydbm", "dbm"),
    ("cPickle", "pickle"),
    ("cStringIO", "io"),
    ("commands", "subprocess"),
    ("cookielib", "http.cookiejar"),
    ("copy_reg", "copyreg"),
    ("dbhash", "dbm.bsd"),
    ("dbm", "dbm.ndbm"),
    ("dumbdbm", "dbm.dumb"),
    ("dummy_thread", "_dummy_thread"),
    ("gdbm", "dbm.gnu"),
    ("htmlentitydefs", "html.entities"),
    ("httplib", "http.client"),
    ("markupbase", "_markupbase"),
    ("repr", "reprlib"),
    ("robotparser", "urllib.robotparser"),
    ("test.test_support", "test.support"),
    ("thread", "_thread"),
    ("tkColorChooser", "tkinter.colorchooser"),
    ("tkCommonDialog", "tkinter.commondialog"),
    ("tkFileDialog", "tkinter.filedialog"),
    ("tkFont", "tkinter.font"),
    ("tkMessageBox", "tkinter.messagebox"),
    ("tkSimpleDialog", "tkinter.simpledialog"),
    ("ttk", "tkinter.ttk"),
    ("urllib2", "urllib.request"),
    ("urlparse", "urllib.parse"),
    ("whichdb", "dbm"),
    ("xmlrpclib", "xmlrpc.client"),
];

/// `NAME_MAPPING`: Python 2 (module, name) -> Python 3 (module, name), sorted by the Python 2
/// pair.
const NAME_MAPPING: &[(Name, Name)] = &[
    (
        ("UserDict", "IterableUserDict"),
        ("collections", "UserDict"),
    ),
    (("UserDict", "UserDict"), ("collections", "UserDict")),
    (("UserList", "UserList"), ("collections", "UserList")),
    (("UserString", "UserString"), ("collections", "UserString")),
    (("__builtin__", "basestring"), ("builtins", "str")),
    (("__builtin__", "intern"), ("sys", "intern")),
    (("__builtin__", "long"), ("builtins", "int")),
    (("__builtin__", "reduce"), ("functools", "reduce")),
    (("__builtin__", "unichr"), ("builtins", "chr")),
    (("__builtin__", "unicode"), ("builtins", "str")),
    (("__builtin__", "xrange"), ("builtins", "range")),
    (
        ("_multiprocessing", "Connection"),
        ("multiprocessing.connection", "Connection"),
    ),
    (("_socket", "fromfd"), ("socket", "fromfd")),
    (
        ("exceptions", "ArithmeticError"),
        ("builtins", "ArithmeticError"),
    ),
    (
        ("exceptions", "AssertionError"),
        ("builtins", "AssertionError"),
    ),
    (
        ("exceptions", "AttributeError"),
        ("builtins", "AttributeError"),
    ),
    (
        ("exceptions", "BaseException"),
        ("builtins", "BaseException"),
    ),
    (("exceptions", "BufferError"), ("builtins", "BufferError")),
    (("exceptions", "BytesWarning"), ("builtins", "BytesWarning")),
    (
        ("exceptions", "DeprecationWarning"),
        ("builtins", "DeprecationWarning"),
    ),
    (("exceptions", "EOFError"), ("builtins", "EOFError")),
    (
        ("exceptions", "EnvironmentError"),
        ("builtins", "EnvironmentError"),
    ),
    (("exceptions", "Exception"), ("builtins", "Exception")),
    (
        ("exceptions", "FloatingPointError"),
        ("builtins", "FloatingPointError"),
    ),
    (
        ("exceptions", "FutureWarning"),
        ("builtins", "FutureWarning"),
    ),
    (
        ("exceptions", "GeneratorExit"),
        ("builtins", "GeneratorExit"),
    ),
    (("exceptions", "IOError"), ("builtins", "IOError")),
    (("exceptions", "ImportError"), ("builtins", "ImportError")),
    (
        ("exceptions", "ImportWarning"),
        ("builtins", "ImportWarning"),
    ),
    (
        ("exceptions", "IndentationError"),
        ("builtins", "IndentationError"),
    ),
    (("exceptions", "IndexError"), ("builtins", "IndexError")),
    (("exceptions", "KeyError"), ("builtins", "KeyError")),
    (
        ("exceptions", "KeyboardInterrupt"),
        ("builtins", "KeyboardInterrupt"),
    ),
    (("exceptions", "LookupError"), ("builtins", "LookupError")),
    (("exceptions", "MemoryError"), ("builtins", "MemoryError")),
    (("exceptions", "NameError"), ("builtins", "NameError")),
    (
        ("exceptions", "NotImplementedError"),
        ("builtins", "NotImplementedError"),
    ),
    (("exceptions", "OSError"), ("builtins", "OSError")),
    (
        ("exceptions", "OverflowError"),
        ("builtins", "OverflowError"),
    ),
    (
        ("exceptions", "PendingDeprecationWarning"),
        ("builtins", "PendingDeprecationWarning"),
    ),
    (
        ("exceptions", "ReferenceError"),
        ("builtins", "ReferenceError"),
    ),
    (("exceptions", "RuntimeError"), ("builtins", "RuntimeError")),
    (
        ("exceptions", "RuntimeWarning"),
        ("builtins", "RuntimeWarning"),
    ),
    (("exceptions", "StandardError"), ("builtins", "Exception")),
    (
        ("exceptions", "StopIteration"),
        ("builtins", "StopIteration"),
    ),
    (("exceptions", "SyntaxError"), ("builtins", "SyntaxError")),
    (
        ("exceptions", "SyntaxWarning"),
        ("builtins", "SyntaxWarning"),
    ),
    (("exceptions", "SystemError"), ("builtins", "SystemError")),
    (("exceptions", "SystemExit"), ("builtins", "SystemExit")),
    (("exceptions", "TabError"), ("builtins", "TabError")),
    (
        ("exceptions", "TargetScopeError"),
        ("builtins", "TargetScopeError"),
    ),
    (("exceptions", "TypeError"), ("builtins", "TypeError")),
    (
        ("exceptions", "UnboundLocalError"),
        ("builtins", "UnboundLocalError"),
    ),
    (
        ("exceptions", "UnicodeDecodeError"),
        ("builtins", "UnicodeDecodeError"),
    ),
    (
        ("exceptions", "UnicodeEncodeError"),
        ("builtins", "UnicodeEncodeError"),
    ),
    (("exceptions", "UnicodeError"), ("builtins", "UnicodeError")),
    (
        ("exceptions", "UnicodeTranslateError"),
        ("builtins", "UnicodeTranslateError"),
    ),
    (
        ("exceptions", "UnicodeWarning"),
        ("builtins", "UnicodeWarning"),
    ),
    (("exceptions", "UserWarning"), ("builtins", "UserWarning")),
    (("exceptions", "ValueError"), ("builtins", "ValueError")),
    (("exceptions", "Warning"), ("builtins", "Warning")),
    (
        ("exceptions", "ZeroDivisionError"),
        ("builtins", "ZeroDivisionError"),
    ),
    (("itertools", "ifilter"), ("builtins", "filter")),
    (("itertools", "ifilterfalse"), ("itertools", "filterfalse")),
    (("itertools", "imap"), ("builtins", "map")),
    (("itertools", "izip"), ("builtins", "zip")),
    (("itertools", "izip_longest"), ("itertools", "zip_longest")),
    (
        ("multiprocessing", "AuthenticationError"),
        ("multiprocessing.context", "AuthenticationError"),
    ),
    (
        ("multiprocessing", "BufferTooShort"),
        ("multiprocessing.context", "BufferTooShort"),
    ),
    (
        ("multiprocessing", "ProcessError"),
        ("multiprocessing.context", "ProcessError"),
    ),
    (
        ("multiprocessing", "TimeoutError"),
        ("multiprocessing.context", "TimeoutError"),
    ),
    (
        ("multiprocessing.forking", "Popen"),
        ("multiprocessing.popen_fork", "Popen"),
    ),
    (
        ("multiprocessing.process", "Process"),
        ("multiprocessing.context", "Process"),
    ),
    (("socket", "_socketobject"), ("socket", "SocketType")),
    (
        ("urllib", "ContentTooShortError"),
        ("urllib.error", "ContentTooShortError"),
    ),
    (("urllib", "getproxies"), ("urllib.request", "getproxies")),
    (
        ("urllib", "pathname2url"),
        ("urllib.request", "pathname2url"),
    ),
    (("urllib", "quote"), ("urllib.parse", "quote")),
    (("urllib", "quote_plus"), ("urllib.parse", "quote_plus")),
    (("urllib", "unquote"), ("urllib.parse", "unquote")),
    (("urllib", "unquote_plus"), ("urllib.parse", "unquote_plus")),
    (
        ("urllib", "url2pathname"),
        ("urllib.request", "url2pathname"),
    ),
    (("urllib", "urlcleanup"), ("urllib.request", "urlcleanup")),
    (("urllib", "urlencode"), ("urllib.parse", "urlencode")),
    (("urllib", "urlopen"), ("urllib.request", "urlopen")),
    (("urllib", "urlretrieve"), ("urllib.request", "urlretrieve")),
    (("urllib2", "HTTPError"), ("urllib.error", "HTTPError")),
    (("urllib2", "URLError"), ("urllib.error", "URLError")),
    (("whichdb", "whichdb"), ("dbm", "whichdb")),
];

/// `REVERSE_IMPORT_MAPPING`: Python 3 module -> Python 2 module, sorted by the Python 3 name.
const REVERSE_IMPORT_MAPPING: &[(&str, &str)] = &[
    ("_bz2", "bz2"),
    ("_dbm", "dbm"),
    ("_dummy_thread", "dummy_thread"),
    ("_functools", "functools"),
    ("_gdbm", "gdbm"),
    ("_markupbase", "markupbase"),
    ("_pickle", "pickle"),
    ("_thread", "thread"),
    ("builtins", "__builtin__"),
    ("collections.abc", "_abcoll"),
    ("configparser", "ConfigParser"),
    ("copyreg", "copy_reg"),
    ("dbm", "anydbm"),
    ("dbm.bsd", "dbhash"),
    ("dbm.dumb", "dumbdbm"),
    ("dbm.gnu", "gdbm"),
    ("dbm.ndbm", "dbm"),
    ("html.entities", "htmlentitydefs"),
    ("html.parser", "HTMLParser"),
    ("http.client", "httplib"),
    ("http.cookiejar", "cookielib"),
    ("http.cookies", "Cookie"),
    ("http.server", "BaseHTTPServer"),
    ("queue", "Queue"),
    ("reprlib", "repr"),
    ("socketserver", "SocketServer"),
    ("subprocess", "commands"),
    ("test.support", "test.test_support"),
    ("tkinter", "Tkinter"),
    ("tkinter.colorchooser", "tkColorChooser"),
    ("tkinter.commondialog", "tkCommonDialog"),
    ("tkinter.constants", "Tkconstants"),
    ("tkinter.dialog", "Dialog"),
    ("tkinter.dnd", "Tkdnd"),
    ("tkinter.filedialog", "tkFileDialog"),
    ("tkinter.font", "tkFont"),
    ("tkinter.messagebox", "tkMessageBox"),
    ("tkinter.scrolledtext", "ScrolledText"),
    ("tkinter.simpledialog", "tkSimpleDialog"),
    ("tkinter.tix", "Tix"),
    ("tkinter.ttk", "ttk"),
    ("urllib.parse", "urlparse"),
    ("urllib.request", "urllib2"),
    ("urllib.robotparser", "robotparser"),
    ("winreg", "_winreg"),
    ("xmlrpc.client", "xmlrpclib"),
    ("xmlrpc.server", "SimpleXMLRPCServer"),
];

/// `REVERSE_NAME_MAPPING`: Python 3 (module, name) -> Python 2 (module, name), sorted by the
/// Python 3 pair.
const REVERSE_NAME_MAPPING: &[(Name, Name)] = &[
    (("_functools", "reduce"), ("__builtin__", "reduce")),
    (("_socket", "socket"), ("socket", "_socketobject")),
    (
        ("builtins", "ArithmeticError"),
        ("exceptions", "ArithmeticError"),
    ),
    (
        ("builtins", "AssertionError"),
        ("exceptions", "AssertionError"),
    ),
    (
        ("builtins", "AttributeError"),
        ("exceptions", "AttributeError"),
    ),
    (
        ("builtins", "BaseException"),
        ("exceptions", "BaseException"),
    ),
    (("builtins", "BrokenPipeError"), ("exceptions", "OSError")),
    (("builtins", "BufferError"), ("exceptions", "BufferError")),
    (("builtins", "BytesWarning"), ("exceptions", "BytesWarning")),
    (("builtins", "ChildProcessError"), ("exceptions", "OSError")),
    (
        ("builtins", "ConnectionAbortedError"),
        ("exceptions", "OSError"),
    ),
    (("builtins", "ConnectionError"), ("exceptions", "OSError")),
    (
        ("builtins", "ConnectionRefusedError"),
        ("exceptions", "OSError"),
    ),
    (
        ("builtins", "ConnectionResetError"),
        ("exceptions", "OSError"),
    ),
    (
        ("builtins", "DeprecationWarning"),
        ("exceptions", "DeprecationWarning"),
    ),
    (("builtins", "EOFError"), ("exceptions", "EOFError")),
    (
        ("builtins", "EnvironmentError"),
        ("exceptions", "EnvironmentError"),
    ),
    (("builtins", "Exception"), ("exceptions", "Exception")),
    (("builtins", "FileExistsError"), ("exceptions", "OSError")),
    (("builtins", "FileNotFoundError"), ("exceptions", "OSError")),
    (
        ("builtins", "FloatingPointError"),
        ("exceptions", "FloatingPointError"),
    ),
    (
        ("builtins", "FutureWarning"),
        ("exceptions", "FutureWarning"),
    ),
    (
        ("builtins", "GeneratorExit"),
        ("exceptions", "GeneratorExit"),
    ),
    (("builtins", "IOError"), ("exceptions", "IOError")),
    (("builtins", "ImportError"), ("exceptions", "ImportError")),
    (
        ("builtins", "ImportWarning"),
        ("exceptions", "ImportWarning"),
    ),
    (
        ("builtins", "IndentationError"),
        ("exceptions", "IndentationError"),
    ),
    (("builtins", "IndexError"), ("exceptions", "IndexError")),
    (("builtins", "InterruptedError"), ("exceptions", "OSError")),
    (("builtins", "IsADirectoryError"), ("exceptions", "OSError")),
    (("builtins", "KeyError"), ("exceptions", "KeyError")),
    (
        ("builtins", "KeyboardInterrupt"),
        ("exceptions", "KeyboardInterrupt"),
    ),
    (("builtins", "LookupError"), ("exceptions", "LookupError")),
    (("builtins", "MemoryError"), ("exceptions", "MemoryError")),
    (
        ("builtins", "ModuleNotFoundError"),
        ("exceptions", "ImportError"),
    ),
    (("builtins", "NameError"), ("exceptions", "NameError")),
    (
        ("builtins", "NotADirectoryError"),
        ("exceptions", "OSError"),
    ),
    (
        ("builtins", "NotImplementedError"),
        ("exceptions", "NotImplementedError"),
    ),
    (("builtins", "OSError"), ("exceptions", "OSError")),
    (
        ("builtins", "OverflowError"),
        ("exceptions", "OverflowError"),
    ),
    (
        ("builtins", "PendingDeprecationWarning"),
        ("exceptions", "PendingDeprecationWarning"),
    ),
    (("builtins", "PermissionError"), ("exceptions", "OSError")),
    (
        ("builtins", "ProcessLookupError"),
        ("exceptions", "OSError"),
    ),
    (
        ("builtins", "ReferenceError"),
        ("exceptions", "ReferenceError"),
    ),
    (("builtins", "RuntimeError"), ("exceptions", "RuntimeError")),
    (
        ("builtins", "RuntimeWarning"),
        ("exceptions", "RuntimeWarning"),
    ),
    (
        ("builtins", "StopIteration"),
        ("exceptions", "StopIteration"),
    ),
    (("builtins", "SyntaxError"), ("exceptions", "SyntaxError")),
    (
        ("builtins", "SyntaxWarning"),
        ("exceptions", "SyntaxWarning"),
    ),
    (("builtins", "SystemError"), ("exceptions", "SystemError")),
    (("builtins", "SystemExit"), ("exceptions", "SystemExit")),
    (("builtins", "TabError"), ("exceptions", "TabError")),
    (
        ("builtins", "TargetScopeError"),
        ("exceptions", "TargetScopeError"),
    ),
    (("builtins", "TimeoutError"), ("exceptions", "OSError")),
    (("builtins", "TypeError"), ("exceptions", "TypeError")),
    (
        ("builtins", "UnboundLocalError"),
        ("exceptions", "UnboundLocalError"),
    ),
    (
        ("builtins", "UnicodeDecodeError"),
        ("exceptions", "UnicodeDecodeError"),
    ),
    (
        ("builtins", "UnicodeEncodeError"),
        ("exceptions", "UnicodeEncodeError"),
    ),
    (("builtins", "UnicodeError"), ("exceptions", "UnicodeError")),
    (
        ("builtins", "UnicodeTranslateError"),
        ("exceptions", "UnicodeTranslateError"),
    ),
    (
        ("builtins", "UnicodeWarning"),
        ("exceptions", "UnicodeWarning"),
    ),
    (("builtins", "UserWarning"), ("exceptions", "UserWarning")),
    (("builtins", "ValueError"), ("exceptions", "ValueError")),
    (("builtins", "Warning"), ("exceptions", "Warning")),
    (
        ("builtins", "ZeroDivisionError"),
        ("exceptions", "ZeroDivisionError"),
    ),
    (("builtins", "chr"), ("__builtin__", "unichr")),
    (("builtins", "filter"), ("itertools", "ifilter")),
    (("builtins", "int"), ("__builtin__", "long")),
    (("builtins", "map"), ("itertools", "imap")),
    (("builtins", "range"), ("__builtin__", "xrange")),
    (("builtins", "str"), ("__builtin__", "unicode")),
    (("builtins", "zip"), ("itertools", "izip")),
    (
        ("collections", "UserDict"),
        ("UserDict", "IterableUserDict"),
    ),
    (("collections", "UserList"), ("UserList", "UserList")),
    (("collections", "UserString"), ("UserString", "UserString")),
    (("dbm", "whichdb"), ("whichdb", "whichdb")),
    (("functools", "reduce"), ("__builtin__", "reduce")),
    (
        ("http.server", "CGIHTTPRequestHandler"),
        ("CGIHTTPServer", "CGIHTTPRequestHandler"),
    ),
    (
        ("http.server", "SimpleHTTPRequestHandler"),
        ("SimpleHTTPServer", "SimpleHTTPRequestHandler"),
    ),
    (("itertools", "filterfalse"), ("itertools", "ifilterfalse")),
    (("itertools", "zip_longest"), ("itertools", "izip_longest")),
    (
        ("multiprocessing.connection", "Connection"),
        ("_multiprocessing", "Connection"),
    ),
    (
        ("multiprocessing.context", "AuthenticationError"),
        ("multiprocessing", "AuthenticationError"),
    ),
    (
        ("multiprocessing.context", "BufferTooShort"),
        ("multiprocessing", "BufferTooShort"),
    ),
    (
        ("multiprocessing.context", "Process"),
        ("multiprocessing.process", "Process"),
    ),
    (
        ("multiprocessing.context", "ProcessError"),
        ("multiprocessing", "ProcessError"),
    ),
    (
        ("multiprocessing.context", "TimeoutError"),
        ("multiprocessing", "TimeoutError"),
    ),
    (
        ("multiprocessing.popen_fork", "Popen"),
        ("multiprocessing.forking", "Popen"),
    ),
    (("socket", "fromfd"), ("_socket", "fromfd")),
    (("sys", "intern"), ("__builtin__", "intern")),
    (
        ("tkinter.filedialog", "FileDialog"),
        ("FileDialog", "FileDialog"),
    ),
    (
        ("tkinter.filedialog", "LoadFileDialog"),
        ("FileDialog", "LoadFileDialog"),
    ),
    (
        ("tkinter.filedialog", "SaveFileDialog"),
        ("FileDialog", "SaveFileDialog"),
    ),
    (
        ("tkinter.simpledialog", "SimpleDialog"),
        ("SimpleDialog", "SimpleDialog"),
    ),
    (
        ("urllib.error", "ContentTooShortError"),
        ("urllib", "ContentTooShortError"),
    ),
    (("urllib.error", "HTTPError"), ("urllib2", "HTTPError")),
    (("urllib.error", "URLError"), ("urllib2", "URLError")),
    (("urllib.parse", "quote"), ("urllib", "quote")),
    (("urllib.parse", "quote_plus"), ("urllib", "quote_plus")),
    (("urllib.parse", "unquote"), ("urllib", "unquote")),
    (("urllib.parse", "unquote_plus"), ("urllib", "unquote_plus")),
    (("urllib.parse", "urlencode"), ("urllib", "urlencode")),
    (("urllib.request", "getproxies"), ("urllib", "getproxies")),
    (
        ("urllib.request", "pathname2url"),
        ("urllib", "pathname2url"),
    ),
    (
        ("urllib.request", "url2pathname"),
        ("urllib", "url2pathname"),
    ),
    (("urllib.request", "urlcleanup"), ("urllib", "urlcleanup")),
    (("urllib.request", "urlopen"), ("urllib", "urlopen")),
    (("urllib.request", "urlretrieve"), ("urllib", "urlretrieve")),
    (
        ("xmlrpc.server", "DocCGIXMLRPCRequestHandler"),
        ("DocXMLRPCServer", "DocCGIXMLRPCRequestHandler"),
    ),
    (
        ("xmlrpc.server", "DocXMLRPCRequestHandler"),
        ("DocXMLRPCServer", "DocXMLRPCRequestHandler"),
    ),
    (
        ("xmlrpc.server", "DocXMLRPCServer"),
        ("DocXMLRPCServer", "DocXMLRPCServer"),
    ),
    (
        ("xmlrpc.server", "ServerHTMLDoc"),
        ("DocXMLRPCServer", "ServerHTMLDoc"),
    ),
    (
        ("xmlrpc.server", "XMLRPCDocGenerator"),
        ("DocXMLRPCServer", "XMLRPCDocGenerator"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Both tables equal the running CPython's `_compat_pickle` (plus the one entry of
    /// CPython's main branch), and are sorted for the binary search.
    #[test]
    fn tables_are_cpythons() {
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import _compat_pickle as c\n\
                 for (m, n), (m3, n3) in sorted(c.NAME_MAPPING.items()): print(m, n, m3, n3)\n\
                 print('--')\n\
                 for m, m3 in sorted(c.IMPORT_MAPPING.items()): print(m, m3)",
            )
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let (names, imports) = out.split_once("--\n").unwrap_or_default();
        let mut want: Vec<String> = names.lines().map(str::to_owned).collect();
        want.push("exceptions TargetScopeError builtins TargetScopeError".to_owned());
        want.sort();
        let have: Vec<String> = NAME_MAPPING
            .iter()
            .map(|((m, n), (m3, n3))| format!("{m} {n} {m3} {n3}"))
            .collect();
        assert!(
            want.len() > 80,
            "python3 gave {} NAME_MAPPING entries",
            want.len()
        );
        assert_eq!(have, want);
        let have: Vec<String> = IMPORT_MAPPING
            .iter()
            .map(|(m, m3)| format!("{m} {m3}"))
            .collect();
        let want: Vec<&str> = imports.lines().collect();
        assert!(
            want.len() > 50,
            "python3 gave {} IMPORT_MAPPING entries",
            want.len()
        );
        assert_eq!(have, want);
        assert!(NAME_MAPPING.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(IMPORT_MAPPING.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(python3_name("__builtin__", "set"), ("builtins", "set"));
        assert_eq!(python3_name("__builtin__", "long"), ("builtins", "int"));
        assert_eq!(
            python3_name("UserDict", "UserDict"),
            ("collections", "UserDict")
        );
        assert_eq!(python3_name("UserDict", "Other"), ("collections", "Other"));
        assert_eq!(python3_name("builtins", "set"), ("builtins", "set"));
    }

    /// The reverse tables equal the running CPython's (plus `TargetScopeError`), are sorted,
    /// and `python2_name` gives what CPython's protocol-2 pickler writes.
    #[test]
    fn reverse_tables_are_cpythons() {
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import _compat_pickle as c\n\
                 for (m, n), (m2, n2) in sorted(c.REVERSE_NAME_MAPPING.items()): print(m, n, m2, n2)\n\
                 print('--')\n\
                 for m, m2 in sorted(c.REVERSE_IMPORT_MAPPING.items()): print(m, m2)\n\
                 print('--')\n\
                 import pickle, io, collections, socket\n\
                 for o in (set, str, OSError, FileNotFoundError, collections.UserDict, io.StringIO, socket.socket):\n\
                 \x20   g = pickle.dumps(o, 2).split(b'c', 1)[1].split(b'\\n')\n\
                 \x20   print(o.__module__, o.__qualname__, g[0].decode(), g[1].decode())",
            )
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let mut parts = out.split("--\n");
        let (names, imports, written) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let mut want: Vec<String> = names.lines().map(str::to_owned).collect();
        want.push("builtins TargetScopeError exceptions TargetScopeError".to_owned());
        want.sort();
        let have: Vec<String> = REVERSE_NAME_MAPPING
            .iter()
            .map(|((m, n), (m2, n2))| format!("{m} {n} {m2} {n2}"))
            .collect();
        assert!(want.len() > 100, "python3 gave {} entries", want.len());
        assert_eq!(have, want);
        let have: Vec<String> = REVERSE_IMPORT_MAPPING
            .iter()
            .map(|(m, m2)| format!("{m} {m2}"))
            .collect();
        let want: Vec<&str> = imports.lines().collect();
        assert!(want.len() > 40, "python3 gave {} entries", want.len());
        assert_eq!(have, want);
        assert!(REVERSE_NAME_MAPPING.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(REVERSE_IMPORT_MAPPING.windows(2).all(|w| w[0].0 < w[1].0));
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 7, "{written}");
        for line in lines {
            let w: Vec<&str> = line.split(' ').collect();
            let [m, n, m2, n2] = w.as_slice() else {
                panic!("{line}")
            };
            assert_eq!(python2_name(m, n), (*m2, *n2), "{line}");
        }
        assert_eq!(
            python2_name("builtins", "FileNotFoundError"),
            ("exceptions", "OSError")
        );
    }
}
