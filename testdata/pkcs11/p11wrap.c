/*
 * p11wrap: a PKCS#11 module that forwards every call to a real module (SoftHSM2 by default)
 * and, on command, makes the token fail, stall or slow down. For quickshake's tests and
 * bench/pkcs11 only.
 *
 * C_GetFunctionList hands out a copy of the real module's function list with four entries
 * replaced (C_OpenSession, C_Login, C_Sign, C_Decrypt,
 * C_GetMechanismInfo); every other entry is the real
 * module's own function, so every call reaches it.
 *
 * Environment:
 *   P11WRAP_MODULE    the real module (default /usr/lib/softhsm/libsofthsm2.so)
 *   P11WRAP_CONTROL   a file read before each replaced call: "ok" (or absent/empty),
 *                     "removed" (CKR_DEVICE_REMOVED from signatures and decryptions,
 *                     CKR_TOKEN_NOT_PRESENT from C_OpenSession), "stall" (the call waits
 *                     until the file says something else)
 *   P11WRAP_DELAY_US  microseconds added to each signature and decryption (a network HSM)
 *   P11WRAP_NO_RAW_DECRYPT=1  C_GetMechanismInfo(CKM_RSA_X_509) leaves out CKF_DECRYPT (a
 *                     token that refuses raw RSA decryption)
 *
 * Build: cc -shared -fPIC -O2 -I/usr/include/p11-kit-1 p11wrap.c -o libp11wrap.so -ldl
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <p11-kit/pkcs11.h>

static CK_FUNCTION_LIST real;
static CK_FUNCTION_LIST wrapped;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static CK_RV load_rv = CKR_GENERAL_ERROR;
static long delay_us;

enum mode { MODE_OK, MODE_REMOVED, MODE_STALL };

static enum mode current_mode(void) {
    const char *path = getenv("P11WRAP_CONTROL");
    if (!path || !*path) return MODE_OK;
    FILE *f = fopen(path, "r");
    if (!f) return MODE_OK;
    char buf[32] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strncmp(buf, "removed", 7) == 0) return MODE_REMOVED;
    if (strncmp(buf, "stall", 5) == 0) return MODE_STALL;
    return MODE_OK;
}

/* Waits out a stall; returns the mode that ended it. */
static enum mode gate(void) {
    enum mode m;
    while ((m = current_mode()) == MODE_STALL) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return m;
}

static void add_delay(void) {
    if (delay_us <= 0) return;
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static CK_RV w_open_session(CK_SLOT_ID slot, CK_FLAGS flags, void *app, CK_NOTIFY notify,
                            CK_SESSION_HANDLE_PTR session) {
    if (gate() == MODE_REMOVED) return CKR_TOKEN_NOT_PRESENT;
    return real.C_OpenSession(slot, flags, app, notify, session);
}

static CK_RV w_login(CK_SESSION_HANDLE s, CK_USER_TYPE user, CK_UTF8CHAR_PTR pin, CK_ULONG len) {
    if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
    return real.C_Login(s, user, pin, len);
}

static CK_RV w_sign(CK_SESSION_HANDLE s, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig,
                    CK_ULONG_PTR sig_len) {
    if (sig != NULL) {
        if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
        add_delay();
    }
    return real.C_Sign(s, data, len, sig, sig_len);
}

static CK_RV w_decrypt(CK_SESSION_HANDLE s, CK_BYTE_PTR in, CK_ULONG len, CK_BYTE_PTR out,
                       CK_ULONG_PTR out_len) {
    if (out != NULL) {
        if (gate() == MODE_REMOVED) return CKR_DEVICE_REMOVED;
        add_delay();
    }
    return real.C_Decrypt(s, in, len, out, out_len);
}

static CK_RV w_mechanism_info(CK_SLOT_ID slot, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR info) {
    CK_RV rv = real.C_GetMechanismInfo(slot, type, info);
    const char *no = getenv("P11WRAP_NO_RAW_DECRYPT");
    if (rv == CKR_OK && info && type == CKM_RSA_X_509 && no && *no == '1') {
        info->flags &= ~(CK_FLAGS)CKF_DECRYPT;
    }
    return rv;
}

static void load(void) {
    const char *path = getenv("P11WRAP_MODULE");
    if (!path || !*path) path = "/usr/lib/softhsm/libsofthsm2.so";
    const char *d = getenv("P11WRAP_DELAY_US");
    delay_us = d ? atol(d) : 0;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "p11wrap: cannot load %s: %s\n", path, dlerror());
        return;
    }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR list = NULL;
    if (!get || get(&list) != CKR_OK || !list) return;
    real = *list;
    wrapped = *list;
    wrapped.C_OpenSession = w_open_session;
    wrapped.C_Login = w_login;
    wrapped.C_Sign = w_sign;
    wrapped.C_Decrypt = w_decrypt;
    wrapped.C_GetMechanismInfo = w_mechanism_info;
    load_rv = CKR_OK;
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out) {
    if (!out) return CKR_ARGUMENTS_BAD;
    pthread_once(&once, load);
    if (load_rv != CKR_OK) return load_rv;
    *out = &wrapped;
    return CKR_OK;
}
