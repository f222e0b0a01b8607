/* natstool: the tests' own NATS JetStream client — create a stream, publish lines, read a subject's messages, a consumer's state. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

/*
 * natstool stream  NAME SUBJECT...        create the stream (file storage), or keep it
 * natstool pub     SUBJECT [NAME:VALUE]... publish each stdin line, these headers on each, PubAck awaited
 * natstool lastseq STREAM SUBJECT         the subject's last stream sequence (0: none)
 * natstool maxage  STREAM SECONDS         set the stream's max_age (0: unlimited)
 * natstool dump    STREAM SUBJECT         each message of the subject: seq, headers (name=value;...), data
 * natstool consumer STREAM NAME           ack_floor, delivered, pending, ack_pending, waiting (one a line)
 * The server is $NATS_URL; $NATS_TOKEN, if set, the token to connect with;
 * $NATS_TLS_CA, if set, TLS with the server verified against that CA file.
 */

static void die(const char *what, natsStatus s)
{
        fprintf(stderr, "natstool: %s: %s (%s)\n", what, natsStatus_GetText(s), nats_GetLastError(NULL));
        exit(1);
}

static int cmd_stream(jsCtx *js, int argc, char **argv)
{
        jsStreamConfig sc;
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        if (argc < 2)
                return 2;
        jsStreamConfig_Init(&sc);
        sc.Name = argv[0];
        sc.Subjects = (const char **)argv + 1;
        sc.SubjectsLen = argc - 1;
        sc.Storage = js_FileStorage;
        natsStatus s = js_AddStream(&si, js, &sc, NULL, &jerr);
        if (s != NATS_OK && jerr != JSStreamNameExistErr)
                die("add stream", s);
        jsStreamInfo_Destroy(si);
        return 0;
}

static int cmd_maxage(jsCtx *js, int argc, char **argv)
{
        jsStreamInfo *si = NULL, *up = NULL;
        jsErrCode jerr = 0;
        if (argc != 2)
                return 2;
        natsStatus s = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
        if (s != NATS_OK)
                die("stream info", s);
        si->Config->MaxAge = strtoll(argv[1], NULL, 10) * 1000000000LL;
        if ((s = js_UpdateStream(&up, js, si->Config, NULL, &jerr)) != NATS_OK)
                die("update stream", s);
        jsStreamInfo_Destroy(up);
        jsStreamInfo_Destroy(si);
        return 0;
}

static int cmd_pub(jsCtx *js, int argc, char **argv)
{
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        long n = 0;
        if (argc < 1)
                return 2;
        while ((len = getline(&line, &cap, stdin)) >= 0) {
                natsMsg *m = NULL;
                jsPubAck *pa = NULL;
                jsErrCode jerr = 0;
                if (len && line[len - 1] == '\n')
                        line[--len] = '\0';
                natsStatus s = natsMsg_Create(&m, argv[0], NULL, line, (int)len);
                for (int i = 1; s == NATS_OK && i < argc; i++) {
                        char *colon = strchr(argv[i], ':');
                        if (!colon)
                                return 2;
                        *colon = '\0';
                        s = natsMsgHeader_Add(m, argv[i], colon + 1);
                        *colon = ':';
                }
                if (s == NATS_OK)
                        s = js_PublishMsg(&pa, js, m, NULL, &jerr);
                if (s != NATS_OK)
                        die("publish", s);
                jsPubAck_Destroy(pa);
                natsMsg_Destroy(m);
                n++;
        }
        free(line);
        fprintf(stderr, "natstool: published %ld message(s) to %s\n", n, argv[0]);
        return 0;
}

static int cmd_lastseq(jsCtx *js, int argc, char **argv)
{
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        if (argc < 2)
                return 2;
        natsStatus s = js_GetLastMsg(&m, js, argv[0], argv[1], NULL, &jerr);
        if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) {
                printf("0\n");
                return 0;
        }
        if (s != NATS_OK)
                die("last message", s);
        printf("%" PRIu64 "\n", natsMsg_GetSequence(m));
        natsMsg_Destroy(m);
        return 0;
}

static void print_msg(natsMsg *m)
{
        const char **keys = NULL;
        int nk = 0;
        printf("%" PRIu64 "\t", natsMsg_GetSequence(m));
        if (natsMsgHeader_Keys(m, &keys, &nk) == NATS_OK) {
                for (int i = 0; i < nk; i++) {
                        const char *v = NULL;
                        natsMsgHeader_Get(m, keys[i], &v);
                        printf("%s%s=%s", i ? ";" : "", keys[i], v ? v : "");
                }
                free((void *)keys);
        }
        printf("\t%.*s\n", natsMsg_GetDataLength(m), natsMsg_GetData(m));
}

static int cmd_dump(jsCtx *js, int argc, char **argv)
{
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        if (argc < 2)
                return 2;
        natsStatus s = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
        if (s != NATS_OK)
                die("stream info", s);
        for (uint64_t seq = si->State.FirstSeq; seq && seq <= si->State.LastSeq; seq++) {
                natsMsg *m = NULL;
                if (js_GetMsg(&m, js, argv[0], seq, NULL, &jerr) != NATS_OK)
                        continue; /* deleted */
                if (!strcmp(natsMsg_GetSubject(m), argv[1]))
                        print_msg(m);
                natsMsg_Destroy(m);
        }
        jsStreamInfo_Destroy(si);
        return 0;
}

static int cmd_consumer(jsCtx *js, int argc, char **argv)
{
        jsConsumerInfo *ci = NULL;
        jsErrCode jerr = 0;
        if (argc < 2)
                return 2;
        natsStatus s = js_GetConsumerInfo(&ci, js, argv[0], argv[1], NULL, &jerr);
        if (s != NATS_OK)
                die("consumer info", s);
        printf("ack_floor %" PRIu64 "\ndelivered %" PRIu64 "\npending %" PRIu64 "\nack_pending %" PRId64
               "\nwaiting %" PRId64 "\n",
               ci->AckFloor.Stream, ci->Delivered.Stream, ci->NumPending, ci->NumAckPending, ci->NumWaiting);
        jsConsumerInfo_Destroy(ci);
        return 0;
}

int main(int argc, char **argv)
{
        const char *url = getenv("NATS_URL");
        const char *token = getenv("NATS_TOKEN");
        const char *ca = getenv("NATS_TLS_CA");
        natsOptions *o = NULL;
        natsConnection *nc = NULL;
        jsCtx *js = NULL;
        int rc = 2;
        if (argc < 2 || !url) {
                fprintf(stderr, "usage: natstool stream|pub|maxage|lastseq|dump|consumer ARGS (NATS_URL set)\n");
                return 2;
        }
        natsStatus s = natsOptions_Create(&o);
        if (s == NATS_OK)
                s = natsOptions_SetURL(o, url);
        if (s == NATS_OK && token && *token)
                s = natsOptions_SetToken(o, token);
        if (s == NATS_OK && ca && *ca) {
                s = natsOptions_SetSecure(o, true);
                if (s == NATS_OK)
                        s = natsOptions_LoadCATrustedCertificates(o, ca);
        }
        if (s == NATS_OK)
                s = natsConnection_Connect(&nc, o);
        natsOptions_Destroy(o);
        if (s != NATS_OK)
                die("connect", s);
        if ((s = natsConnection_JetStream(&js, nc, NULL)) != NATS_OK)
                die("JetStream", s);
        if (!strcmp(argv[1], "stream"))
                rc = cmd_stream(js, argc - 2, argv + 2);
        else if (!strcmp(argv[1], "pub"))
                rc = cmd_pub(js, argc - 2, argv + 2);
        else if (!strcmp(argv[1], "maxage"))
                rc = cmd_maxage(js, argc - 2, argv + 2);
        else if (!strcmp(argv[1], "lastseq"))
                rc = cmd_lastseq(js, argc - 2, argv + 2);
        else if (!strcmp(argv[1], "dump"))
                rc = cmd_dump(js, argc - 2, argv + 2);
        else if (!strcmp(argv[1], "consumer"))
                rc = cmd_consumer(js, argc - 2, argv + 2);
        if (rc == 2)
                fprintf(stderr, "natstool: bad arguments for %s\n", argv[1]);
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
        return rc;
}
