#!/usr/bin/env escript
%% -*- erlang -*-
%%! -noshell
%%
%% The Erlang interop stage (interop/run.sh): MapReduce jobs built with
%% term_to_binary/1 exactly as riakc (riakc_pb_socket:mapred/3) builds
%% them, sent over a plain gen_tcp socket to a Basalt node's PB port.
%% riakc itself is not installable here (no hex), so this script frames
%% the messages by hand: a 4-byte length (gen_tcp's {packet, 4}), the
%% message code, then the protobuf fields written and read below.
%%
%%   RpbMapRedReq  23: request = 1 (bytes), content_type = 2 (bytes)
%%   RpbMapRedResp 24: phase = 1 (varint), response = 2 (bytes), done = 3 (bool)
%%   RpbErrorResp   0: errmsg = 1 (bytes), errcode = 2 (varint)
%%   RpbPutReq     11: bucket 1, key 2, content 4 (RpbContent: value 1,
%%                     content_type 2, links 6 (bucket 1, key 2, tag 3),
%%                     indexes 10 (key 1, value 2)), w 5   -> RpbPutResp 12
%%   RpbPingReq     1 -> RpbPingResp 2
%%
%% Each response's `response` is decoded with binary_to_term/1, as riakc
%% does. Usage: BASALT_PB_ADDR=127.0.0.1:8087 escript mapred.escript
%% Prints PASS/FAIL per check and "erlang: N passed, M failed"; exits 1 on
%% any failure.

-mode(compile).

-define(BUCKET, <<"erl_mr">>).

main(_) ->
    {Host, Port} = addr(os:getenv("BASALT_PB_ADDR")),
    S = case gen_tcp:connect(Host, Port, [binary, {packet, 4}, {active, false}], 5000) of
            {ok, Sock} -> Sock;
            {error, Why} ->
                io:format(standard_error, "cannot connect to ~s: ~p~n",
                          [os:getenv("BASALT_PB_ADDR"), Why]),
                halt(2)
        end,
    seed(S),
    Results = [check(S, Name, Fun) || {Name, Fun} <- checks()],
    Passed = length([ok || ok <- Results]),
    Failed = length(Results) - Passed,
    gen_tcp:close(S),
    io:format("erlang: ~b passed, ~b failed~n", [Passed, Failed]),
    halt(if Failed == 0 -> 0; true -> 1 end).

addr(false) ->
    io:format(standard_error, "BASALT_PB_ADDR is not set~n", []),
    halt(2);
addr(Text) ->
    [H, P] = string:split(Text, ":", trailing),
    {ok, Ip} = inet:parse_address(H),
    {Ip, list_to_integer(P)}.

check(S, Name, Fun) ->
    Outcome = try Fun(S) catch C:R:St -> {crash, C, R, hd(St)} end,
    case Outcome of
        ok ->
            io:format("PASS ~s~n", [Name]),
            ok;
        Other ->
            io:format("FAIL ~s: ~p~n", [Name, Other]),
            failed
    end.

%% ---------------------------------------------------------------- data

%% k0..k9 = "0".."9" (n_int = N); a term_to_binary value; two linked
%% people.
seed(S) ->
    [ok = put(S, ?BUCKET, key(N), integer_to_binary(N), <<"text/plain">>,
              [{<<"n_int">>, integer_to_binary(N)}], [])
     || N <- lists:seq(0, 9)],
    ok = put(S, <<"erl_raw">>, <<"term">>, term_to_binary({stored, [1, 2.5, <<255>>]}),
             <<"application/x-erlang-binary">>, [], []),
    ok = put(S, <<"erl_people">>, <<"alice">>, <<"{}">>, <<"application/json">>, [],
             [{<<"erl_people">>, <<"bob">>, <<"friend">>},
              {<<"erl_people">>, <<"carol">>, <<"boss">>}]),
    ok = put(S, <<"erl_people">>, <<"bob">>, <<"{}">>, <<"application/json">>, [], []).

key(N) -> <<"k", (integer_to_binary(N))/binary>>.

put(S, Bucket, Key, Value, CType, Indexes, Links) ->
    Content = [field(1, Value), field(2, CType)]
        ++ [field(6, [field(1, B), field(2, K), field(3, T)]) || {B, K, T} <- Links]
        ++ [field(10, [field(1, F), field(2, V)]) || {F, V} <- Indexes],
    Req = [field(1, Bucket), field(2, Key), field(4, Content), varint_field(5, 3)],
    case call(S, 11, Req) of
        {12, _} -> ok;
        Other -> {put_failed, Key, Other}
    end.

%% ---------------------------------------------------------------- checks

checks() ->
    Keys = [{?BUCKET, key(N)} || N <- [1, 2, 3]],
    [{"modfun map_object_value over listed keys",
      fun(S) ->
              expect(S, mapred(S, Keys, [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true}]),
                     [{0, [<<"1">>, <<"2">>, <<"3">>]}])
      end},
     {"a whole bucket, reduce_string_to_integer and reduce_sum",
      fun(S) ->
              expect(S, mapred(S, ?BUCKET,
                               [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, false},
                                {reduce, {modfun, riak_kv_mapreduce, reduce_string_to_integer}, none, false},
                                {reduce, {modfun, riak_kv_mapreduce, reduce_sum}, none, true}]),
                     [{2, [45]}])
      end},
     {"key filters and reduce_count_inputs",
      fun(S) ->
              Filters = [[<<"tokenize">>, <<"k">>, 1], [<<"string_to_int">>],
                         [<<"less_than">>, 4]],
              expect(S, mapred(S, {?BUCKET, Filters},
                               [{reduce, {modfun, riak_kv_mapreduce, reduce_count_inputs}, none, true}]),
                     [{0, [4]}])
      end},
     {"a 2i range input (integer bounds)",
      fun(S) ->
              expect(S, mapred(S, {index, ?BUCKET, <<"n_int">>, 2, 4},
                               [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true}]),
                     [{0, [<<"2">>, <<"3">>, <<"4">>]}])
      end},
     {"a 2i equality input",
      fun(S) ->
              expect(S, mapred(S, {index, ?BUCKET, <<"n_int">>, <<"7">>},
                               [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true}]),
                     [{0, [<<"7">>]}])
      end},
     {"reduce_sort keeps Erlang term order",
      fun(S) ->
              R = mapred(S, [{?BUCKET, key(N)} || N <- [9, 3, 5]],
                         [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, false},
                          {reduce, {modfun, riak_kv_mapreduce, reduce_sort}, none, true}]),
              exact(S, R, [{1, [<<"3">>, <<"5">>, <<"9">>]}])
      end},
     {"reduce_set_union and two kept phases",
      fun(S) ->
              R = mapred(S, [{?BUCKET, key(1)}, {?BUCKET, key(1)}, {?BUCKET, key(2)}],
                         [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true},
                          {reduce, {modfun, riak_kv_mapreduce, reduce_set_union}, none, true}]),
              expect(S, R, [{0, [<<"1">>, <<"1">>, <<"2">>]}, {1, [<<"1">>, <<"2">>]}])
      end},
     {"a JavaScript anonymous map and a named reduce",
      fun(S) ->
              R = mapred(S, Keys,
                         [{map, {jsanon, <<"function(v) { return [parseInt(v.values[0].data, 10) * 10]; }">>}, none, false},
                          {reduce, {jsfun, <<"Riak.reduceSum">>}, none, true}]),
              expect(S, R, [{1, [60]}])
      end},
     {"a JavaScript object comes back as mochijson2's {struct, ...}",
      fun(S) ->
              R = mapred(S, [{?BUCKET, key(4)}],
                         [{map, {jsanon, <<"function(v) { return [{key: v.key}]; }">>}, none, true}]),
              exact(S, R, [{0, [{struct, [{<<"key">>, <<"k4">>}]}]}])
      end},
     {"a link phase gives {{Bucket, Key}, Tag}",
      fun(S) ->
              R = mapred(S, [{<<"erl_people">>, <<"alice">>}],
                         [{link, <<"erl_people">>, <<"friend">>, true}]),
              exact(S, R, [{0, [{{<<"erl_people">>, <<"bob">>}, <<"friend">>}]}])
      end},
     {"a term_to_binary value comes back byte for byte",
      fun(S) ->
              case mapred(S, [{<<"erl_raw">>, <<"term">>}],
                          [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true}]) of
                  {ok, [{0, [Bin]}]} when is_binary(Bin) ->
                      case binary_to_term(Bin) of
                          {stored, [1, 2.5, <<255>>]} -> ping(S);
                          Other -> {wrong_term, Other}
                      end;
                  Other -> {unexpected, Other}
              end
      end},
     {"no phases: the inputs with their key data",
      fun(S) ->
              KD = {my, <<"data">>, [1]},
              exact(S, mapred(S, [{{?BUCKET, key(1)}, KD}], []),
                    [{0, [{{?BUCKET, key(1)}, KD}]}])
      end},
     {"include_notfound gives {error, notfound}",
      fun(S) ->
              exact(S, mapred(S, [{?BUCKET, <<"missing">>}],
                              [{map, {modfun, riak_kv_mapreduce, map_object_value},
                                <<"include_notfound">>, true}]),
                    [{0, [{error, notfound}]}])
      end},
     {"qfun of an exported built-in runs",
      fun(S) ->
              expect(S, mapred(S, Keys, [{map, {qfun, fun riak_kv_mapreduce:map_object_value/3}, none, true}]),
                     [{0, [<<"1">>, <<"2">>, <<"3">>]}])
      end},
     {"timeout infinity is accepted",
      fun(S) ->
              Job = [{inputs, [{?BUCKET, key(5)}]},
                     {query, [{map, {modfun, riak_kv_mapreduce, map_object_value}, none, true}]},
                     {timeout, infinity}],
              expect(S, send_job(S, term_to_binary(Job)), [{0, [<<"5">>]}])
      end},
     {"an anonymous qfun is refused, the socket still serves",
      fun(S) ->
              F = fun(O, _, _) -> [O] end,
              refused(S, mapred(S, Keys, [{map, {qfun, F}, none, true}]), "anonymous fun")
      end},
     {"strfun is refused with Riak's text, the socket still serves",
      fun(S) ->
              R = mapred(S, Keys, [{map, {strfun, "fun(O, _, _) -> [O] end."}, none, true}]),
              refused(S, R, "Error sending inputs: {error,worker_startup_failed}")
      end},
     {"an unknown module is refused as Riak refuses it",
      fun(S) ->
              refused(S, mapred(S, Keys, [{map, {modfun, no_such_module, f}, none, true}]),
                      "Phase {xform_map,0}: invalid module named in PhaseSpec function")
      end},
     {"a malformed term is badarg, the socket still serves",
      fun(S) -> refused(S, send_job(S, <<131, 108, 255, 255, 255, 255, 106>>), "badarg") end},
     {"bad inputs get Riak's message",
      fun(S) ->
              refused(S, mapred(S, 42, []), "{inputs,{\"Inputs must be a binary bucket")
      end}].

%% Results as riakc's mapred/3 gathers them: [{Phase, Results}], phases in
%% order. `expect` compares each phase's results sorted, `exact` as sent.
expect(S, {ok, Got}, Want) ->
    case [{P, lists:sort(R)} || {P, R} <- Got] == [{P, lists:sort(R)} || {P, R} <- Want] of
        true -> ping(S);
        false -> {got, Got, wanted, Want}
    end;
expect(_S, Other, _Want) ->
    Other.

exact(S, {ok, Want}, Want) -> ping(S);
exact(_S, Got, Want) -> {got, Got, wanted, {ok, Want}}.

refused(S, {error, Msg}, Prefix) ->
    case string:find(Msg, Prefix) of
        nomatch -> {message, Msg, wanted, Prefix};
        _ -> ping(S)
    end;
refused(_S, Other, _Prefix) ->
    {not_refused, Other}.

ping(S) ->
    case call(S, 1, []) of
        {2, <<>>} -> ok;
        Other -> {ping, Other}
    end.

%% ---------------------------------------------------------------- MapReduce

%% The job riakc_pb_socket:mapred_stream/6 sends.
mapred(S, Inputs, Query) ->
    send_job(S, term_to_binary([{inputs, Inputs}, {query, Query}, {timeout, 60000}])).

send_job(S, Bin) ->
    ok = gen_tcp:send(S, [23 | [field(1, Bin), field(2, <<"application/x-erlang-binary">>)]]),
    collect(S, []).

collect(S, Acc) ->
    case recv(S) of
        {24, Body} ->
            F = fields(Body),
            Acc1 = case lists:keyfind(2, 1, F) of
                       {2, Data} ->
                           {1, Phase} = lists:keyfind(1, 1, F),
                           add(Phase, binary_to_term(Data), Acc);
                       false ->
                           Acc
                   end,
            case lists:keyfind(3, 1, F) of
                {3, 1} -> {ok, lists:keysort(1, Acc1)};
                _ -> collect(S, Acc1)
            end;
        {0, Body} ->
            F = fields(Body),
            {1, Msg} = lists:keyfind(1, 1, F),
            {error, binary_to_list(Msg)};
        Other ->
            {unexpected_frame, Other}
    end.

add(Phase, Results, Acc) ->
    case lists:keyfind(Phase, 1, Acc) of
        {Phase, Old} -> lists:keystore(Phase, 1, Acc, {Phase, Old ++ Results});
        false -> [{Phase, Results} | Acc]
    end.

%% ---------------------------------------------------------------- frames

call(S, Code, Fields) ->
    ok = gen_tcp:send(S, [Code | Fields]),
    recv(S).

recv(S) ->
    case gen_tcp:recv(S, 0, 30000) of
        {ok, <<Code, Body/binary>>} -> {Code, Body};
        Error -> Error
    end.

%% Protobuf: a length-delimited field (bytes or a message) and a varint field.
field(N, Value) ->
    Bin = iolist_to_binary(Value),
    [varint(N bsl 3 bor 2), varint(byte_size(Bin)), Bin].

varint_field(N, V) ->
    [varint(N bsl 3), varint(V)].

varint(V) when V < 128 -> <<V>>;
varint(V) -> <<1:1, (V band 127):7, (varint(V bsr 7))/binary>>.

%% [{FieldNumber, Value}] of a message: varints as integers, the rest as
%% binaries.
fields(<<>>) ->
    [];
fields(Bin) ->
    {Key, Rest} = unvarint(Bin),
    case Key band 7 of
        0 ->
            {V, Rest1} = unvarint(Rest),
            [{Key bsr 3, V} | fields(Rest1)];
        2 ->
            {Len, Rest1} = unvarint(Rest),
            <<V:Len/binary, Rest2/binary>> = Rest1,
            [{Key bsr 3, V} | fields(Rest2)]
    end.

unvarint(<<0:1, V:7, Rest/binary>>) ->
    {V, Rest};
unvarint(<<1:1, V:7, Rest/binary>>) ->
    {High, Rest1} = unvarint(Rest),
    {V bor (High bsl 7), Rest1}.
