#!/bin/bash
# usage: watch.sh <stdout-file> <mode: cprof|perf> <outdir>
out=$1; mode=$2; dir=$3; bench=$4; mkdir -p $dir
declare -A done
while true; do
  for sys in gateway floor node-ws; do
    n=$(grep -c "^\[.*\] $sys: .* live in" $out 2>/dev/null)
    if [ "${n:-0}" -gt "${done[$sys]:-0}" ]; then
      done[$sys]=$n
      case $sys in
        gateway) pid=$(pgrep -P $bench -f "gateway.cli serve --port");;
        floor) pid=$(pgrep -P $bench -f "peers/floor.py");;
        node-ws) pid=$(pgrep -P $bench -f "node_ws.js");;
      esac
      sleep 2.5
      if [ $mode = cprof ] && [ $sys = gateway ]; then
        kill -USR1 $pid; sleep 7; kill -USR2 $pid; echo "cprof $sys $pid round $n" >> $dir/log
      elif [ $mode = perf ]; then
        perf record -F 1999 -g -p $pid -o $dir/$sys-$n.data -- sleep 7 2>>$dir/log >/dev/null
        echo "perf $sys $pid round $n" >> $dir/log
      fi
    fi
  done
  grep -q "written\|bench:" $out 2>/dev/null && [ -n "$(grep -c 'saturat' $out)" ] && :
  sleep 0.3
done
