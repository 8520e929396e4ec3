// The status page's HTML: one static document whose script fetches status.json every
// 2 s and draws it, the curves as inline SVG. Nothing is loaded from elsewhere.
#include "master/status_page.h"

namespace pl {

const char* StatusPageHtml() {
  return R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>paddle_like job</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse} td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}
.bar{display:inline-block;height:12px;vertical-align:middle}
.charts{display:flex;flex-wrap:wrap;gap:16px} svg{background:#fafafa;border:1px solid #ddd}
.ev-join{color:#2a7} .ev-leave{color:#777} .ev-lease_expired{color:#c60} .ev-failure{color:#c00} .ev-failover{color:#a0a}
#err{color:#c00}
</style></head><body>
<h1>paddle_like job <span id="state"></span></h1><div id="err"></div>
<div id="job"></div><div id="losses" style="color:#c00"></div>
<div class="charts"><div><h2>loss</h2><svg id="loss" width="460" height="240"></svg></div>
<div><h2>train accuracy</h2><svg id="acc" width="460" height="240"></svg></div></div>
<div id="tests"></div>
<h2>trainers</h2><table id="trainers"></table>
<h2>pservers</h2><table id="pservers"></table>
<h2>last events</h2><table id="events"></table>
<script>
const COLORS=["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2","#17becf"];
function esc(s){return String(s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));}
function row(cells,tag){return "<tr>"+cells.map(c=>"<"+(tag||"td")+">"+c+"</"+(tag||"td")+">").join("")+"</tr>";}
function chart(id,curves,col){
  const svg=document.getElementById(id),W=460,H=240,L=50,R=110,T=10,B=25;
  let xs=[],ys=[];
  for(const n in curves)for(const p of curves[n].points){if(p[col]>=0){xs.push(p[0]);ys.push(p[col]);}}
  if(!xs.length){svg.innerHTML='<text x="20" y="120">no data yet</text>';return;}
  let x0=Math.min(...xs),x1=Math.max(...xs),y0=Math.min(...ys),y1=Math.max(...ys);
  if(x1==x0)x1=x0+1; if(y1==y0){y1+=0.5;y0-=0.5;}
  const X=x=>L+(x-x0)/(x1-x0)*(W-L-R),Y=y=>T+(1-(y-y0)/(y1-y0))*(H-T-B);
  let s='<line x1="'+L+'" y1="'+(H-B)+'" x2="'+(W-R)+'" y2="'+(H-B)+'" stroke="#999"/>'+
        '<line x1="'+L+'" y1="'+T+'" x2="'+L+'" y2="'+(H-B)+'" stroke="#999"/>'+
        '<text x="2" y="'+(T+10)+'" font-size="11">'+y1.toPrecision(3)+'</text>'+
        '<text x="2" y="'+(H-B)+'" font-size="11">'+y0.toPrecision(3)+'</text>'+
        '<text x="'+L+'" y="'+(H-6)+'" font-size="11">step '+x0+'</text>'+
        '<text x="'+(W-R-60)+'" y="'+(H-6)+'" font-size="11">'+x1+'</text>';
  let i=0;
  for(const n in curves){
    const c=COLORS[i%COLORS.length],pts=curves[n].points.filter(p=>p[col]>=0);
    s+='<polyline fill="none" stroke="'+c+'" stroke-width="1.5" points="'+pts.map(p=>X(p[0]).toFixed(1)+","+Y(p[col]).toFixed(1)).join(" ")+'"/>';
    if(pts.length==1)s+='<circle r="3" fill="'+c+'" cx="'+X(pts[0][0]).toFixed(1)+'" cy="'+Y(pts[0][col]).toFixed(1)+'"/>';
    s+='<text x="'+(W-R+8)+'" y="'+(T+14+16*i)+'" font-size="12" fill="'+c+'">'+esc(n)+'</text>';
    i++;
  }
  svg.innerHTML=s;
}
function draw(st){
  const j=st.job||{};
  document.getElementById("state").textContent=j.job_done?"(done)":"(running)";
  const total=(j.todo||0)+(j.pending||0)+(j.done||0)+(j.failed||0)||1,bar=(n,c)=>'<span class="bar" style="width:'+(300*n/total)+'px;background:'+c+'"></span>';
  document.getElementById("job").innerHTML="pass "+Math.max(1,Math.min(j.pass,j.num_passes))+" of "+j.num_passes+
    " &nbsp; tasks: todo "+j.todo+", pending "+j.pending+", done "+j.done+", failed "+j.failed+
    " &nbsp; samples "+j.samples_done+" &nbsp; live trainers "+j.live_trainers+"<br>"+
    bar(j.done,"#2ca02c")+bar(j.pending,"#ff7f0e")+bar(j.todo,"#ccc")+bar(j.failed,"#d62728");
  document.getElementById("losses").innerHTML=(j.losses||[]).map(l=>"loss: "+esc(l)).join("<br>")+
    (j.failed_task_ids&&j.failed_task_ids.length?"<br>loss: tasks set aside as failed (ids "+j.failed_task_ids.join(",")+")":"");
  chart("loss",st.curves,1); chart("acc",st.curves,2);
  let tests=[];for(const n in st.curves){const c=st.curves[n];if(c.test_metric_name)tests.push(esc(n)+": test "+esc(c.test_metric_name)+" "+c.test_metric.toFixed(4));}
  document.getElementById("tests").innerHTML=tests.join("<br>");
  document.getElementById("trainers").innerHTML=row(["name","id","task","last heartbeat","step","loss"],"th")+
    st.trainers.map(t=>{const c=(st.curves[t.name]||{points:[]}).points,p=c[c.length-1];
      return row([esc(t.name),t.id,t.task||"-",t.heartbeat_s_ago.toFixed(1)+" s ago",p?p[0]:"",p?p[1].toFixed(4):""]);}).join("");
  document.getElementById("pservers").innerHTML=row(["index","address","generation","replicas"],"th")+
    st.pservers.map(p=>row([p.index,esc(p.address),p.generation,
      p.replicas?p.replicas+" in sync"+(p.joining?", "+p.joining+" catching up":"")+(p.missing?", "+p.missing+" missing":""):"-"])).join("");
  document.getElementById("events").innerHTML=st.events.slice().reverse().map(e=>
    '<tr class="ev-'+e.kind+'"><td>'+new Date(e.time*1000).toISOString().substr(11,8)+"</td><td>"+e.kind+"</td><td>"+esc(e.text)+"</td></tr>").join("");
}
async function refresh(){
  try{const r=await fetch("status.json",{cache:"no-store"});draw(await r.json());document.getElementById("err").textContent="";}
  catch(e){document.getElementById("err").textContent="master unreachable: "+e;}
}
refresh(); setInterval(refresh,2000);
</script></body></html>
)HTML";
}

}  // namespace pl
